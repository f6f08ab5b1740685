// The zh-Hans help texts (HelpTopic): only the prose is translated; option and command names,
// values, SPEC syntax, example command lines, JSON, field names and exit codes stay as in the
// English ones (Help.swift), so that a learner can type and search them. Terms as in
// docs/glossary.zh-Hans.md; the English spec term in parentheses on first use.

let mainHelpChinese = """
ble-hci \(toolVersion)：一个直接通过 HCI 通信的低功耗蓝牙（Bluetooth Low Energy）主机协议栈
（不经过 bluetoothd），记录每一个包，并逐层解码。

用法：ble-hci [GLOBAL OPTIONS] COMMAND [OPTIONS]

命令：
  scan          列出广播者（advertiser），默认主动扫描
  central       作为中心设备（central）连接外设（peripheral）：发现、读、写、订阅
  peripheral    广播并提供 `demo`、`band` 或 `secure` 配置文件（profile），或一张 GATT 表
  advertise     广播者角色：一个不可连接的扩展广播集，可选再加一串周期性广播
  shell         交互式会话：两种角色同时、多条链路、Tab 补全、历史记录
  session       以 JSON 行（--json）从 stdin 接收 shell 的命令，供脚本和测试使用
  bonds         列出或删除保存的绑定（bond，即 SMP 密钥）
  dump          逐层解码 btsnoop、pcap、pcapng 或 PacketLogger 抓包，或画成图（--flow、--svg）
  demo          中心设备 + 外设，跑在进程内的虚拟链路上，全程跟踪
  controllers   在 TCP 或 UNIX 套接字上提供虚拟 LE 控制器（controller）
  proxy         站在另一个主机协议栈和控制器之间：转发、记录、解码
  adapters      列出内核的 HCI 适配器、谁占用着它们、怎样释放

全局选项（放在 COMMAND 之前或之后都可以）：
  -t, --transport SPEC   控制器：hciN | hci:N | tcp:HOST:PORT | unix:PATH |
                         serial:PATH[@BAUD] | virtual（仅 demo）   （默认 hci0）
  -w, --capture FILE     记录每一个 HCI 包（*.pcap → pcap，*.pcapng → pcapng，其他 → btsnoop）
      --trace[=LAYERS]   实时打印每一个解码后的包（hci,l2cap,att,gatt,smp）
      --json             在 stdout 上每行输出一个 JSON 对象
      --lang LANG        人读文本的语言：scan、central、peripheral、demo 的输出行、进度和
                         错误，dump --flow/--svg，用法错误和 --help：en 或 zh-Hans（默认按
                         locale：LC_ALL，然后 LC_MESSAGES，然后 LANG；zh_CN*、zh_SG*、
                         zh_Hans* → zh-Hans）；JSON、字段名和退出码永远不变；shell 和
                         session 只有帮助跟随语言，其余输出这一版仍是英文
                         （例如 ble-hci --lang zh-Hans demo）
  -h, --help             帮助（也可以：ble-hci COMMAND --help）
      --version          打印版本号
      --man              把本手册打印成 man 手册页 ble-hci(1)（roff 格式，英文）
      --completions SH   打印 SH 的补全脚本：bash 或 zsh

示例：
  ble-hci demo
  ble-hci --lang zh-Hans demo                 # 人读的输出用简体中文
  sudo ble-hci -t hci0 scan --duration 5
  sudo ble-hci -t hci0 -w run.pcap central name:Heart --subscribe 2a37 --count 10
  ble-hci dump run.pcap --layers hci,l2cap,att

退出码：0 成功，1 操作失败，2 用法错误，3 传输层/适配器不可用或丢失，130/143 命令完成前
被 SIGINT/SIGTERM 中断（一直运行到 Ctrl-C 的命令，例如不带 --duration 的 scan 或
peripheral，被 Ctrl-C 停止时退出码为 0）。

环境变量：设置了 NO_COLOR（任何值）就不用颜色；只有输出到终端时才用颜色。
"""

let scanHelpChinese = """
    用法：ble-hci scan [--duration S] [--passive] [--duplicates] [--service UUID]... [--name TEXT]
                       [--rssi DBM] [--phy 1m|2m|coded] [--manufacturer ID]... [--service-data UUID]...
                       [--bonds DIR]
          ble-hci scan --sync TARGET [--count N] [--duration S]

    扫描（scanning）广播者：每个广播者第一次出现、以及它的数据变化时打印一行（带
    --duplicates 时每个报告都打印）。不同种类的过滤条件必须全部满足；同一种过滤条件重复给出时，
    满足其中任意一个值即可。结束时为每个显示过的广播者打印一份汇总：听到的广播事件数、
    测得的广播间隔和扫描期间的 RSSI 范围（写到 stderr；带 --json 时为 stdout 上的
    {"event":"summary",...}；见 docs/cli.md）。

      --duration S        S 秒后停止（默认：直到 Ctrl-C）
      --passive           被动扫描（不发扫描请求，所以没有扫描响应数据）
      --duplicates        报告每一个广播报告，而不只是变化
      --service UUID      只要列出了这个服务的广播者（可重复；满足任意一个即可）
      --name TEXT         只要名称包含 TEXT 的广播者（不区分大小写）
      --rssi DBM          只要信号不弱于此值的报告，-127 到 20 dBm（也写作 --rssi-min）；
                          没有 RSSI 的报告不匹配
      --phy P             只要数据在 P 上收到的广播：1m、2m 或 coded（扩展广播看辅助
                          PHY，否则看主 PHY；传统广播为 1m）。控制器支持 LE Coded PHY
                          特性时，扫描在 LE Coded 和 LE 1M 上同时进行；不支持时，听不到
                          远距离（主 PHY 为 Coded）的广播者
      --manufacturer ID   只要带有公司 ID 的厂商自定义数据（Manufacturer Specific Data）的
                          广播者（16 位十六进制，例如 0x004c；可重复；满足任意一个即可）
      --service-data UUID 只要带有 UUID 的服务数据（Service Data）的广播者（可重复；满足
                          任意一个即可）
      --bonds DIR         用其中绑定的 IRK 解析私有地址：已绑定的对端以身份地址显示
                          （"bonded AA:BB:../public"；JSON 为 identityAddress）
                          （默认 $XDG_STATE_HOME/ble-hci，否则 ~/.local/state/ble-hci）
      --sync TARGET       不列出广播者，而是：找到 TARGET（一个地址，可加 /public 或
                          /random，或 name:TEXT，与 central 的写法相同；10 s 内），同步到
                          它的周期性广播序列（LE Periodic Advertising Create Sync；10 s 内），
                          把每条周期性广播的各个报告拼成一条完整打印
                          （{"event":"periodicReport","data":HEX,"rssi":N,"sync":N}，
                          控制器截断时带 "truncated":true），然后终止同步。TARGET 没有
                          周期性广播或同步丢失时退出码为 1
      --count N           与 --sync 一起用：收到 N 条周期性广播后停止

    间隔是一个广播者的各个广播报告到达本主机协议栈的时间间隔的中位数（即它的广播间隔，
    加上控制器附加的 0-10 ms advDelay）；扫描窗口漏掉一些事件时（这里真实的射频每 60 ms 只听
    30 ms），它可能是广播间隔的整数倍：所以同时给出最短的间隔。

    示例：
      sudo ble-hci -t hci0 scan --duration 10 --service 180d --json
      ble-hci -t tcp:127.0.0.1:9002 scan --duration 5 --rssi -70 --manufacturer 0x004c
      ble-hci -t tcp:127.0.0.1:9002 scan --duration 5 --service-data 180f --phy 1m --json
      ble-hci -t tcp:127.0.0.1:9002 --json scan --sync name:train --count 3
    """

let centralHelpChinese = """
    用法：ble-hci central TARGET... [ACTIONS] [--mtu N] [--timeout S]
                         [--profile band [--date YYYY-MM-DD]]
                         [--pair] [--eatt N [--eatt-mtu M]] [SECURITY OPTIONS]

    TARGET：AA:BB:CC:DD:EE:FF[/public|/random] 或 name:TEXT（第一个名称包含 TEXT 的广播者，
    不区分大小写）。CHAR：一个 UUID（2a37、32 位或 128 位）或一个句柄（0x0010）。
    给出多个 TARGET 时同时寻找并连接它们，每条链路执行同样的动作；每个 --json 事件都带有
    该链路的 "connection" 和 "target"，人读的输出行和错误以 [TARGET] 开头。某个目标没找到
    或没连上，这次运行就失败（退出码 1），但不会中止其他目标。

    动作（ACTIONS），按给出的顺序执行：
      --read CHAR                       读一个值（长值会读完整）
      --write CHAR=HEX                  带响应的写（Write Request）
      --write-without-response CHAR=HEX 写命令（Write Command，无响应）
      --subscribe CHAR [--count N] [--duration S]
                                        订阅通知（notification）或指示（indication），
                                        看特征支持哪一种；指示在打印后确认；等待中超过
                                        1024 个而丢掉的值会报告出来（stderr，带 --json 时为
                                        {"event":"dropped","count":N,"total":T}）
      --discover                        发现并打印 GATT 树
    不给动作时：连接、交换 MTU、发现全部内容、读出每个可读的值和描述符（descriptor）、
    打印 GATT 树、断开连接。

      --mtu N        请求的 ATT MTU（23-517，默认 517）
      --timeout S    寻找并连接 TARGET 的秒数（默认 10）
      --profile band 使用 band 配置文件的分帧协议（见 docs/band.md）：总步数，以及
                     --date 那天（默认：今天，UTC）每小时的步数/睡眠记录
      --pair         连接后立即配对（pairing）；已有绑定时只加密
      --pair-again   同 --pair；当外设丢失了我们的绑定（用绑定加密失败，PIN or Key
                     Missing，0x06）时重新配对：新绑定替换我们的旧绑定。不带此选项时，
                     中心设备只报告这种情况，不会自行重新配对
      --eatt N       连接后打开 N 个（1-5）增强 ATT（Enhanced ATT）承载（PSM 0x0027 上的
                     增强型基于信用的通道，一次请求；先加密链路，没有绑定就先配对），
                     并把 GATT 请求分摊到这些承载上：每个承载各有一个未完成的请求
                     （{"event":"eatt","bearers":N,"mtu":M}），同时设置 Client Supported
                     Features（0x2B29）的第 1-2 位。
                     Exchange MTU 仍走非增强承载；通知可以从任一承载到来。
                     被拒绝时（外设不支持 EATT）："bearers":0，运行继续走非增强承载
      --eatt-mtu M   然后用 Credit Based Reconfigure Request 把这些承载的接收 MTU 从 517
                     提高到 M（517-65535）：{"event":"eattMTU","mtu":M,"attMTU":A}（A：各通道
                     MTU 中较小的一个）；外设拒绝时为 "message"
    不带 --pair 时，中心设备在必要时才配对：收到 Insufficient Authentication（0x05）或
    Insufficient Encryption（0x0F）的回答时，它加密（有绑定）或配对，然后把该请求重试
    一次；外设的安全请求（Security Request）会得到响应。已绑定的外设连接后立即加密。

    \(securityHelpChinese)

    示例：
      ble-hci -t tcp:127.0.0.1:9001 central name:ble-hci
      sudo ble-hci -t hci0 central F0:F1:F2:F3:F4:F5/random --read fff2 --write fff2=6869 --subscribe fff1 --count 3
      ble-hci -t tcp:127.0.0.1:9001 central name:left name:right --read 2a19 --json   # 同时两条链路
      ble-hci -t tcp:127.0.0.1:9002 central name:secure --read ff01          # 收到 0x05 时配对，然后读
      ble-hci -t tcp:127.0.0.1:9002 central name:secure --pair --io keyboard --mitm --passkey 123456 --read ff02
      ble-hci -t tcp:127.0.0.1:9002 central name:secure --pair --io yesno --mitm --yes --json
      ble-hci -t tcp:127.0.0.1:9002 central name:ble-hci --eatt 2 --read fff2 --read ffe1  # 用两个承载
      ble-hci -t tcp:127.0.0.1:9002 central name:ble-hci --eatt 2 --eatt-mtu 1024    # 然后重新配置
    """

let peripheralHelpChinese = """
    用法：ble-hci peripheral [--name NAME] [--profile demo|band|secure | --gatt FILE] [--duration S]
                             [--security-request] [--eatt] [--directed TARGET] [SECURITY OPTIONS]

    广播（可连接：flags、完整本地名称、配置文件的 16 位服务 UUID）并提供该配置文件，直到
    Ctrl-C 或 --duration 结束；每次断开连接后重新开始广播。

      --name NAME          广播的名称，也是 GAP 设备名称（默认 ble-hci）
      --profile P          demo（默认）、band 或 secure：服务 ff66，含 ff01（读/写，需要
                           加密，"secret"）和 ff02（读/通知，需要经过认证的加密，
                           "authenticated"；CCCD 需要加密）
      --duration S         S 秒后停止
      --gatt FILE          不用配置文件，而提供 FILE 里的 GATT 表：中心设备的 `gatt` 事件
                           （或原样的 --json 输出），包括值、可选的 "permissions"（权限：
                           read、write、readEncrypted、writeEncrypted、readAuthenticated、
                           writeAuthenticated）、"includes" 和 "primary"。
                           文件里的句柄（start、end、handle、valueHandle、描述符的句柄）
                           在一致时保留（递增、在所属服务之内、值紧跟在声明之后、服务器
                           需要的每个 CCCD 都有句柄）；这时服务器自己的 1800/1801 在第一个
                           服务从 13 之后开始时占用句柄 1-13，否则排在最后一个句柄之后。
                           不一致时按文件中的顺序重新分配句柄，并在 stderr 上说明原因。
                           1800/1801 是服务器自己的（文件里的 Device Name 作为默认的
                           --name）；CCCD 的值按客户端分别保存。
                           文件有错时退出码为 2，并指出出错处的 JSON 路径。
      --security-request   每个中心设备连上后请它配对（SMP 安全请求，Security Request）
      --eatt               在已加密的链路上提供增强 ATT 承载（PSM 0x0027），并在 Server
                           Supported Features（0x2B3A，第 0 位）中声明；未加密的链路上拒绝
                           （结果 0x0008，加密不足）。服务器在每个承载上回答，并在一个承载上
                           推送：通知走第一个打开的承载，指示走没有未完成指示的承载（确认也在
                           那里）。该特征在 1801 中多占两个句柄（1-15）
      --directed TARGET    定向广播（ADV_DIRECT_IND，低占空比），只对一个中心设备：TARGET 是它的
                           身份地址（AA:BB:CC:DD:EE:FF[/public|/random]，默认 public）或
                           "bonded"（最近存储的绑定）。不发送广播数据。带 --privacy 且该中心
                           设备的绑定有 IRK 时，控制器把中心设备的 RPA 填入 TargetA

    每个请求都和它的回答一起显示：值的读和写、描述符的读及回答的值、拒绝（--json："error"
    事件）、发现过程（"request" 事件）。

    \(securityHelpChinese)

    示例：
      sudo ble-hci -t hci0 peripheral --profile demo --json
      ble-hci -t tcp:127.0.0.1:9001 peripheral --profile secure --name secure
      ble-hci -t tcp:127.0.0.1:9001 peripheral --eatt       # 为配对的中心设备提供 EATT
      ble-hci -t tcp:127.0.0.1:9001 peripheral --profile secure --io display --mitm --passkey 123456
      ble-hci --json -t tcp:127.0.0.1:9002 central F0:F1:F2:F3:F4:F5 > table.json   # 克隆一个设备
      ble-hci -t tcp:127.0.0.1:9001 peripheral --gatt table.json
      ble-hci -t tcp:127.0.0.1:9001 peripheral --profile secure --privacy --directed bonded
    """

let advertiseHelpChinese = """
    用法：ble-hci advertise [--name NAME] [--data HEX] [--periodic-data HEX] [--interval MS]
                            [--periodic-interval MS] [--duration S]

    广播者（broadcaster）角色（信标、周期性广播序列）：一个不可连接、不可扫描的扩展广播集
    （扩展广播 PDU，集 0，SID 0），带完整本地名称和 --data；带 --periodic-data 时，在该集上
    再加一串周期性广播（periodic advertising）。两者一直开着，直到 --duration 结束或 Ctrl-C，
    然后关闭。--json 打印 {"event":"advertising","address":...,"addressType":...,"name":...,
    "data":HEX[,"periodicData":HEX,"periodicInterval":N]}（periodicInterval 以 1.25 ms 为
    单位）。需要支持扩展广播的控制器，--periodic-data 还需要支持周期性广播（缺少哪条命令，
    stderr 会指出）。用 scan --sync 接收周期性广播。

      --name NAME             广播集数据中的完整本地名称（Complete Local Name，默认 ble-hci）
      --data HEX              名称之后的更多 AD 结构（长度、类型、值；Core Vol 3 Part C 11），
                              例如 05ff4c000102（厂商自定义数据）；连同名称最多 1650 个字节
      --periodic-data HEX     周期性广播的 AD 结构（最多 1650 个字节；以 252 字节的分片发给
                              控制器，接收时每个报告最多 247 字节）
      --interval MS           广播间隔，20 到 10240 ms（默认 100）
      --periodic-interval MS  周期性广播间隔，7.5 到 81918.75 ms（默认 100）
      --duration S            S 秒后停止（默认：直到 Ctrl-C）

    示例：
      ble-hci -t tcp:127.0.0.1:9001 advertise --name beacon --data 05ff4c000102
      ble-hci -t tcp:127.0.0.1:9001 advertise --name train --periodic-data 0aff4c00010203040506 --periodic-interval 50
      ble-hci -t tcp:127.0.0.1:9002 scan --sync name:train --count 5
    """

let bondsHelpChinese = """
    用法：ble-hci bonds [--bonds DIR] [list | remove ADDRESS | clear]

    列出保存的绑定（bonding）：对端身份地址及类型、密钥长度、是否 Secure Connections、
    是否 MITM、是否持有 IRK（--json：{"event":"bond",...}）；或删除一个对端的绑定，或全部删除。
    DIR 默认为 $XDG_STATE_HOME/ble-hci，否则 ~/.local/state/ble-hci。

    示例：
      ble-hci bonds
      ble-hci bonds remove F0:F1:F2:F3:F4:F5
      ble-hci bonds --bonds /tmp/bonds clear
    """

let dumpHelpChinese = """
    用法：ble-hci dump FILE [--layers LAYERS] [--json | --flow | --svg OUT.svg] [--hex] [--explain]
          ble-hci dump FILE --html OUT.html
          ble-hci dump FILE --stats [--json]
          ble-hci dump FILE --attributes [--json]

    逐层解码一个抓包：btsnoop（数据链路类型 1001、1002、2001）、pcap 或 pcapng（Wireshark 的
    默认格式；btmon 写的链路类型 187、201、254）或 Apple PacketLogger（.pklg，两种字节序），
    字段名用 Core 规范的名字。格式错误的包连同原始字节和原因一起打印；解码继续进行。
    pcapng 中其他链路类型的包，以及 PacketLogger 的文本记录（notes、power、kernel、
    syslog……）作为注释显示。

      --layers LAYERS   显示哪些层：hci,l2cap,att,gatt,smp 的逗号列表（默认：全部，显示每个
                        包）。在所选的层里什么都没有的包不显示（例如 --layers att 只显示
                        ATT PDU）；格式错误的包总是显示。FILE 为 - 时从 stdin 读抓包。
      --json            每个包一个 JSON 对象；格式错误的包带 "malformed"（原因）和
                        "raw"（十六进制）
      --flow            把抓包画成文本时序图：本主机协议栈、它的控制器和每个对端（按地址）
                        各占一列；每个包一个箭头，用它在 LAYERS 中最深的那一层的话标注
                        （LAYERS 中一层都没有的包不显示）；箭头按编号的步骤分组（上电、广播、
                        扫描、连接、交换 MTU、发现服务 / 特征 / 描述符、读、写、订阅、通知、
                        配对、加密、断开连接……），每一步写出引起它的 CoreBluetooth 调用
                        （centralManager.connect、peripheral.readValue(for:)，本主机协议栈
                        是 GATT 服务器时则是 peripheralManager 一侧的调用）；协议栈或控制器自行
                        做的步骤会如实说明：连接建立后立即关闭广播、服务器读它的协议栈
                        持有的属性（attribute，如 Generic Access、Generic Attribute、描述符）、
                        客户端为 GATT 缓存做的读和写、配对或加密之后重发的请求；
                        每个改变了控制器链路层状态（standby、advertising、scanning、
                        initiating、connected：依据控制器接受的使能命令和连接事件）的包
                        下面有一行 "link layer: standby → advertising"
      --svg OUT.svg     同一张图，存成独立的 SVG（没有脚本，没有外部资源）：各层用不同
                        颜色，左边是距第一个包的时间，重复的交互和重复的会话折叠成一行
                        "× N"（点击折叠的交互可列出其中最多 40 个包；文本图列出每个包）。
                        与 --flow 一起用时两者都输出。
      --html OUT.html   抓包浏览器：一个在浏览器中打开的独立页面（不联网，没有外部脚本或
                        字体）。包列表按 --flow 的步骤分组，重复的交互折叠（点击展开），
                        旁边逐行对应时序图；选中的包显示其各层字段树和十六进制字节，每层
                        一条色带（H4、HCI、L2CAP、ATT / SMP / 信令）；指向或点击一个字段，
                        会高亮它所在的字节；请求或命令所在的行链接到它的响应（ATT、HCI
                        Command Complete / Status），响应也链接回来；抓包揭示的 GATT 数据库
                        （同 --attributes；点击句柄可过滤）；可按层、操作码、属性句柄和文本
                        过滤；控制器的链路层状态（待机、广播、扫描、发起连接、已连接）
                        标在改变它的那一行上，并在选中的包下给出，与 --flow 的
                        "link layer:" 行相同。只绘制可见的行：50 000 个包的抓包也能滚动。
                        不完整之处：由
                        多个 ACL 包重组出的帧的字段、AD 结构、GATT 层的字段，以及只在
                        目录中描述的命令和事件的字段没有字节范围（只列出，不高亮）。
                        不能与其他选项同用。
      --hex             在每层的字段下面显示该层的十六进制字节（每行 16 个，前面是偏移，
                        同 tshark -x）：hci 为 H4 指示字节之后的 HCI 包，l2cap 为带基本头部
                        的整个帧（分片则为它的 ACL 数据），signaling、att 和 smp 为各自的 PDU
                        （基于信用的通道上的 ATT：由 K 帧重组出的 SDU）。与 --json 一起用时，
                        是一个按层名组织的 "hex" 对象（{"hci":"...","l2cap":"...",
                        "att":"..."}），只含显示出来的层。
      --explain         每个字段下面有一行 "explain:"：它的含义、单位、规范章节，以及对应
                        的 CoreBluetooth 名字（如果有）；然后是解码出的值：Supported
                        Commands、事件掩码、LE 和 LMP 特性中置位的比特，像 btmon 那样一行
                        一个；标准特征的值（Device Name、Appearance、Peripheral Preferred
                        Connection Parameters、Service Changed、Battery Level、Heart Rate
                        Measurement、Body Sensor Location、Device Information 字符串、CCCD、
                        Client/Server Supported Features）；用 CoreBluetooth 的名字写出的
                        特征属性位（characteristic properties）；一个 ATT 错误透露出的该属性
                        的权限（permissions；权限从不在线上传输）。不完整之处：协议栈
                        不发送的命令和事件（hci-catalog.pdl）的参数只有规范名和所属命令的
                        章节，没有含义和单位；LMP 特性第 1、2 页没有命名。与 --json 一起用
                        时，是一个按层和字段路径组织的 "explain" 对象
                        （{"hci":{"connectionInterval":{"meaning":...,"unit":...,"spec":...,
                        "coreBluetooth":...,"decoded":[...]}}}）。
      --stats           不列出包，而是像 btmon -a 那样报告抓包里有什么。按类型统计包；每个
                        连接（连接句柄、LE 或 BR/EDR、对端地址、建立和断开它的包、原因、
                        持续时间）双向的 ACL 包数、字节数和吞吐量；每个 L2CAP 通道（固定
                        通道按 CID，动态通道根据信令跟踪出 PSM 和模式，其他按 CID）双向的
                        帧数和字节数；ATT 通道上（CID 0x0004、PSM 0x001F、EATT）的请求、
                        回答和请求 → 响应延迟（最小、中位数、最大）、指示和确认、按错误码
                        统计的 Error Response；按原因统计的 SMP Pairing Failed；失败的 HCI
                        命令（Command Status 或 Command Complete 的 Status 不是 Success）。
                        与 --json 一起用时输出一个 JSON 对象（字段见 docs/cli.md）。
      --attributes      不列出包，而是按连接给出抓包所揭示的每个 GATT 服务器的属性表
                        （即 Wireshark 的 "ATT Server Attributes"）：服务（Read By Group
                        Type、Find By Type Value）、特征（Read By Type 0x2803）、描述符
                        （Find Information）、最后读到的值（Read、拼接后的 Read Blob、Read
                        By Type、Read Multiple Variable；否则为最后一次通知的值）、拒绝
                        （对读和写的 Error Response），以及在已发现的服务之外的句柄。只有
                        抓包里能看到的：缓存了数据库的客户端什么都不发现；流量从未碰到的
                        要求（例如配对之后才第一次读的值）无从得知，所以克隆出来的设备
                        不带这项要求。与 --json 一起用时，每个服务器一行
                        {"event":"gatt",...}，带有拒绝所透露的权限：`peripheral --gatt FILE`
                        可以提供它，于是在手机日志里看到的设备就能被模拟出来。

    配对（SMP）和加密的包各有自己的步骤；这些步骤对应的 CoreBluetooth 名字是笼统的（配对由
    系统完成，没有对应的应用调用）。

    L2CAP：解码 LE 和 BR/EDR 的信令通道（BR/EDR C 帧中的命令逐条解码，包括配置选项），以及
    BR/EDR 上的 SMP（CID 0x0007）。动态通道从打开它的 Connection Request/Response（BR/EDR、
    LE Credit Based、Enhanced Credit Based）开始，按连接句柄和方向跟踪：这时 l2cap 层显示
    通道的 "psm"、"mode" 和 "openedIn"（打开它的那个包），K 帧显示 "sduLength" 以及一个
    SDU 分在哪些包里。在 PSM 0x001F（BR/EDR 上的 ATT）和 0x0027（EATT）上解码 ATT；其他
    PSM 显示 SDU 的字节和 PSM。Disconnection Response、Disconnection Complete 或该句柄上的
    新连接结束一个通道；抓包开始前就已打开的通道显示为原始字节。配置为增强重传
    （Enhanced Retransmission）或流（Streaming）模式的通道的帧只显示 PSM 和模式，不解码。
    同时最多跟踪 64 个通道（丢弃最早的）。

    损坏的抓包（在记录中间被截断，或某条记录的长度不合理）会打印损坏之前的每条记录，然后在
    stderr 上指出记录编号和字节偏移，退出码为 1，与 tshark 在这种抓包上失败的方式一样。
    文件不存在、不可读或不是抓包时退出码为 1。只有文件头、后面没有包时也一样（并在 stderr
    上说明）。

    示例：
      ble-hci dump demo.pcap --layers hci,att
      ble-hci dump demo.pcap --flow
      ble-hci dump demo.pcap --layers att --flow --svg demo.svg
      ble-hci dump demo.pcap --html demo.html             # 然后在浏览器中打开 demo.html
      ble-hci dump btsnoop_hci.log --layers l2cap,att   # 也包括 BR/EDR 上的 ATT 和 EATT 通道
      ble-hci dump iphone.pklg --json
      ble-hci dump demo.pcap --layers l2cap,att --hex     # 每层的字节显示在它的字段下面
      ble-hci dump demo.pcap --layers hci,gatt --explain  # 每个字段的含义；位字段和值都解码
      ble-hci dump btsnoop_hci.log --stats                # 按连接和通道：字节数、延迟、错误
      ble-hci dump capture.pcapng --stats --json | jq '.connections[].channels[].att.latencyUs'
      ble-hci dump btsnoop_hci.log --attributes --json > device.json && ble-hci peripheral --gatt device.json
    """

let demoHelpChinese = """
    用法：ble-hci demo [--capture FILE] [--airtime] [--air FILE]

    一个中心设备和一个外设（配置文件 demo）在同一进程里，通过进程内的虚拟链路通信：广播、
    扫描、连接、MTU 交换、发现、读、一次写、一次被拒绝的写、通知、断开连接，逐层跟踪。
    两个主机协议栈都被跟踪（每行跟踪以 [central] 或 [peripheral] 开头；--json 中为 "host"
    键），带 -w FILE 时都会记录下来：中心设备记在 FILE，外设记在扩展名前加了 "-peripheral"
    的 FILE 里（demo.pcap → demo-peripheral.pcap）。不需要适配器，也不需要 root。
    --airtime 让链路使用 `controllers` 的空中时间模型（每 30 ms 一个连接事件、每个事件
    若干 PDU、广播事件间隔 100 ms + advDelay）：这样抓包的时间戳反映射频带来的延迟；
    不带此选项时，每个包立即送达。

      --air FILE  空中视图：两个控制器的链路层写进同一个 pcap（链路类型 256，
                  LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR），Wireshark 和 tshark 都能解码：每个
                  广播事件的 PDU（ADV_IND……或 ADV_EXT_IND 和 AUX_ADV_IND）、SCAN_REQ 和
                  SCAN_RSP、带有链路的接入地址、CRCInit、间隔、超时和跳频增量的
                  CONNECT_IND、每个 ACL 分片一个数据 PDU（LLID 起始/续传，按数据长度
                  拆分），以及 HCI 命令所隐含的 LL 控制 PDU（LL_ENC_REQ……
                  LL_START_ENC_RSP、带原因的 LL_TERMINATE_IND、LL_CONNECTION_UPDATE_IND、
                  LL_LENGTH_REQ/RSP、LL_PHY_REQ/RSP/UPDATE_IND、LL_FEATURE_REQ/RSP），每个包
                  带 CRC。带 --airtime 时用空中时间模型的时间，否则用单调时钟。不完整之处：
                  虚拟控制器不加密，所以 LL_START_ENC 之后的内容以明文写入（没有 MIC）并
                  标记为已解密；即时模式不写空 PDU；每个广播事件只用一个主广播信道；没有
                  LL_VERSION_IND（没有 Read Remote Version Information）。ble-hci dump 不读
                  这种链路类型（tshark 可以）

    示例：
      ble-hci demo -w demo.pcap && ble-hci dump demo.pcap --json
      ble-hci demo --air air.pcap && tshark -r air.pcap
      ble-hci demo --airtime -w air.pcap && ble-hci dump air.pcap --stats
      ble-hci demo -w demo.pcap && ble-hci dump demo-peripheral.pcap --flow
    """

let adaptersHelpChinese = """
    用法：ble-hci adapters [--json]

    列出内核的 HCI 适配器（HCIGETDEVLIST/HCIGETDEVINFO）：名称、地址、启用或关闭，以及谁
    占用着它：内核的蓝牙协议栈（已启用并受管理：bluetoothd）、通过 HCI 用户通道占用它的
    程序（内核的管理接口不再列出它），或者无人占用（关闭：ble-hci 可以使用）。对被占用的
    适配器，打印释放它的命令。内核没有蓝牙支持时会说明，退出码为 3。不需要 root。

      --json    每个适配器一个 {"event":"adapter",...} 对象：name、index、address、up、
                userChannelHeld、state、free（被占用时释放它的命令）

    示例：
      ble-hci adapters && sudo ble-hci -t hci0 scan --duration 5
    """

let proxyHelpChinese = """
    用法：ble-hci proxy --host SPEC --controller SPEC [-w FILE] [--trace[=LAYERS]] [--json]

    站在另一个主机协议栈（Bumble、Zephyr 的 native 构建、任何 H4 主机协议栈）和一个
    控制器之间，像 Bumble 的 hci-bridge 和 BlueZ 的 btproxy 那样：把每个 H4 包原样双向
    转发，用 -w FILE 记录下来（与其他命令的 -w 相同：来自主机协议栈的命令和数据为
    "sent"，来自控制器的事件和数据为 "received"），并用 --trace 实时解码。一直运行到
    Ctrl-C（退出码 0）；控制器丢失时退出码为 3。

      --host SPEC        另一个主机协议栈在哪里：tcp:HOST:PORT 或 unix:PATH，由代理监听
                         （端口 0：任意空闲端口；`listening` 行，或带 --json 时的
                         {"event":"listening","spec":...}，会说明是哪个），或
                         serial:PATH[@BAUD]，主机协议栈所接的 UART。一次只接一个主机协议栈：
                         已有一个连着时，第二个连接会被拒绝（关闭并记日志）；它断开后，
                         代理等待下一个
      --controller SPEC  控制器：任何 -t SPEC（hciN、tcp:HOST:PORT、unix:PATH、
                         serial:PATH[@BAUD]，或 virtual：一个独占自己链路的进程内虚拟控制器）
    主机协议栈的连接和断开，以及结束时的汇总，写到 stderr。没有主机协议栈连着时，控制器发来
    的内容会被记录，但不转发。

    示例：
      ble-hci proxy --host tcp:127.0.0.1:9100 --controller tcp:127.0.0.1:9001 -w bumble.btsnoop
      sudo ble-hci proxy --host unix:/tmp/hci0.sock --controller hci0 --trace=hci,att
      ble-hci proxy --host tcp:127.0.0.1:0 --controller virtual --trace --json
    """

let controllersHelpChinese = """
    用法：ble-hci controllers --listen SPEC [--listen SPEC]... [--airtime on|off] [--air FILE]

    提供共享一条虚拟链路的虚拟 LE 控制器。每个 --listen（tcp:HOST:PORT 或 unix:PATH）是
    一个控制器，供一个 H4 主机协议栈连接；每次有新连接，该控制器都从复位状态开始。
    --listen vhci 通过 /dev/vhci 把一个控制器挂到内核上（需要 root 和 hci_vhci 模块）：
    它会作为新的 hciN 适配器出现。端口 0 表示任选一个空闲端口（`listening` 行会说明是
    哪个）。每个监听点只接一个主机协议栈：已有一个连着时，第二个的连接会被拒绝（立即关闭
    并记日志），第一个继续工作。主机协议栈的连接、拒绝和断开都记在 stderr 上。一直运行到
    Ctrl-C。

    --airtime on（默认）模拟空中时间：数据在连接事件中按连接间隔发送（每个事件的 PDU 数
    由 PHY（1M 或 2M）、数据长度和事件长度决定；空 PDU 和 MD 位），广播事件按其间隔加
    advDelay 到来，一个控制器的所有链路和广播集共用它的一个射频，对端沉默（其主机协议栈
    已断开）的链路在监督超时（supervision timeout）时结束。--airtime off 让每个包立即
    通过（用于快速测试）。不完整之处：链路上没有 Coded PHY，没有外设延迟（peripheral
    latency），空闲链路的空事件不占射频时间（docs/performance.md）。

      --air FILE  每个控制器的链路层写进同一个 pcap（链路类型 256），Wireshark 可以解码，
                  与 `demo --air` 写的一样（见 `ble-hci demo --help`），直到 Ctrl-C

    示例：
      ble-hci controllers --listen tcp:127.0.0.1:9001 --listen tcp:127.0.0.1:9002 &
      ble-hci -t tcp:127.0.0.1:9001 peripheral &
      ble-hci -t tcp:127.0.0.1:9002 central name:ble-hci
      ble-hci controllers --listen tcp:127.0.0.1:9001 --listen tcp:127.0.0.1:9002 --airtime off
      ble-hci controllers --listen tcp:127.0.0.1:9001 --listen tcp:127.0.0.1:9002 --air air.pcap
    """

let shellHelpChinese = """
用法：ble-hci [-t SPEC] [-w FILE] [--trace[=LAYERS]] shell [SECURITY OPTIONS]

在一个控制器上的交互式会话，同时担任两种角色：扫描、连接多个外设（每条链路以对端的名称
命名，没有名称时用它的地址）、发现、读、写、订阅（通知一到就打印在提示符上方）、配对、
提供一个配置文件或一张 GATT 表并广播它、跟踪和抓包，用的都是单次命令的那些词：

\(sessionCommandList)

编辑：Left/Right（Ctrl-B/F）、Home/End（Ctrl-A/E）、Alt-B/F 按词移动、Backspace、Delete，
Ctrl-K / Ctrl-U / Ctrl-W 删除到行尾 / 到行首 / 一个词，Ctrl-L 清屏，Up/Down（Ctrl-P/N）
翻看历史记录；历史记录在多次运行之间保留，存在 $XDG_STATE_HOME/ble-hci/history（否则
~/.local/state/ble-hci/history）。Tab 补全命令和选项，然后是见过的地址和名称、所选链路的
UUID 和句柄以及链路名；再按一次 Tab 列出所有候选。
Ctrl-C 停止正在运行的命令（一次扫描、一次连接），shell 继续运行；在提示符处则清空当前行。
在空行上按 Ctrl-D，或输入 quit，结束会话：断开所有链路，停止扫描和广播，关闭抓包文件。
SIGTERM 也以同样的方式结束会话。stdin 不是终端时，逐行读取，不显示提示符。
配对：Just Works；口令输入（passkey entry）和数字比较（numeric comparison）只能用
--passkey N / --yes（shell 不会在一行中间弹出提问）。不支持 OOB。

\(securityHelpChinese)

示例：
  ble-hci -t tcp:127.0.0.1:9002 shell
    ble-hci> connect name:ble-hci
    ble-hci [ble-hci]> read fff2
    ble-hci [ble-hci]> subscribe fff1
    ble-hci [ble-hci]> connect F0:F1:F2:F3:F4:F5
    ble-hci [F0:F1:F2:F3:F4:F5]> links
  printf 'connect name:ble-hci\\nread 2a00\\nquit\\n' | ble-hci -t tcp:127.0.0.1:9002 shell
"""

let sessionHelpChinese = """
用法：ble-hci [-t SPEC] [-w FILE] [--trace[=LAYERS]] session --json [SECURITY OPTIONS]

以 JSON 行的形式接收 shell 的命令，供驱动被测设备的程序使用（见 Tools/examples/session.py
和 docs/cli.md）。stdin 上每行一个请求：
  {"id": 1, "command": "read", "args": ["2a19"], "link": "Thermo"}
  {"id": "r2", "line": "write fff2=6869"}
每个回答和事件都是 stdout 上一行一个 JSON 对象，带有请求的 "id"
（{"event":"read",...,"id":1}）；每个请求以恰好一个 {"id":1,"done":true} 或
{"id":1,"error":"...","exit":N}（N：对应单次命令的退出码）结束。请求之后引起的事件也带它的
id：订阅的通知、链路的断开（带 connect 请求的 id）、广播（带 scan 请求的）、所提供的表上的
连接、读和写（带 serve 请求的）；其余事件不带 id。第一行是 {"event":"ready",...}。
请求并发执行（最多同时 32 个；超出时输入等待）；一行最多 65536 个字节，最多嵌套 8 层；
格式错误的行会得到一个指出原因的 error 对象。"cancel ID" 停止一个正在运行的请求（不带
--duration 的扫描就这样结束）；输入结束时，仍在运行的请求还有 30 s，然后会话像 "quit"
那样退出。不带 --json 时，每行一条命令，输出人读的文本（即没有行编辑器的 shell）。

命令（与 shell 相同；请求中的 "help COMMAND" 回答该命令的帮助）：
\(sessionCommandList)

\(securityHelpChinese)

示例：
  printf '%s\\n' '{"id":1,"line":"connect name:ble-hci"}' '{"id":2,"line":"read fff2"}' | ble-hci -t tcp:127.0.0.1:9002 session --json
  Tools/examples/session.py --transport tcp:127.0.0.1:9002 name:ble-hci
"""
