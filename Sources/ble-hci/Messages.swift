import Decoder

/// The human-readable messages of scan, central, peripheral, demo and the commonest usage
/// errors, in every Language (issue #28). Each language is a switch over every message with no
/// `default`, so a message without a translation does not compile. JSON output never goes
/// through here: its keys and values stay what CLI.md says, whatever the language.
enum Message {
    // usage
    case seeHelp(message: String, hint: String)
    case noCommand
    case unknownCommand(String)
    case unknownOption(String)
    case optionNeedsValue(String)
    case langValue(String)
    // demo
    case demoAdvertiseStep, demoScanStep, demoConnectStep, demoMTUStep, demoDiscoverStep, demoWriteStep
    case demoRefusedWriteStep, demoRefusedReadStep, demoSubscribeStep, demoDisconnectStep
    case demoMTUCoreBluetooth
    case demoAdvertising
    case demoPeripheralSubscribed(uuid: String)
    case demoPeripheralWrote(value: String, uuid: String)
    case demoFound(name: String, address: String, rssi: Int?)
    case demoConnected(handle: UInt16, mtu: Int)
    case demoNowReads(uuid: String, value: String)
    case demoNotification(value: String)
    case demoCaptures(central: String, peripheral: String)
    case demoUnexpectedDatabase
    case attRefused(write: Bool, uuid: String, handle: UInt16, error: String, code: String)
    // scan, central, peripheral
    case localController(address: String, transport: String)
    case scanning(passive: Bool, duration: String?)
    case scanEnded(advertisers: Int)
    case advertisingEvents(Int), advertisingInterval(median: String, shortest: String), rssiRange(Int, Int), listSeparator
    case nameContaining(String)
    case opening(transport: String)
    case scanningFor(target: String, timeout: String)
    case connectingTo(address: String, timeout: String)
    case connectedTo(address: String, handle: UInt16, mtu: Int)
    case disconnected(reason: String, code: String)
    case readValue(what: String, value: String)
    case wroteValue(value: String, what: String, withResponse: Bool)
    case subscribedTo(uuid: String, indications: Bool, count: Int?, duration: String?)
    case received(time: String, indication: Bool, uuid: String, value: String)
    case peripheralRefused(op: String, target: String, error: String, code: String)
    case noSuchCharacteristic(String)
    case noAdvertiserMatched(target: String, within: String, seen: String)
    case couldNotConnect(address: String, error: String)
    case advertisingAs(name: String, address: String, type: String, profile: String, transport: String)
    case privacy(address: String, identity: String)
    case centralConnected(time: String, central: String, handle: UInt16)
    case centralDisconnected(time: String, handle: UInt16, reason: String, code: String)
    case centralSubscribed(time: String, uuid: String, indications: Bool)
    case centralUnsubscribed(time: String, uuid: String)
    case centralWrote(time: String, uuid: String, value: String)
    case centralRead(time: String, uuid: String)
    // one advertiser's line (scan)
    case advBonded, advConnectable(Bool), advServices(String), advManufacturer(String, data: String)
    case advServiceData(String, data: String), advTxPower(Int), advAppearance(String)
    // the GATT tree of --discover and demo
    case treeService(String), treeHandles(UInt16, UInt16), treeCharacteristic(String)
    case treeCharacteristicHandles(declaration: UInt16, value: UInt16), treeValue, treeNotReadable(String)
    case treeDescriptor(String), treeHandle(UInt16)
    // security events (CLI.md "Security (SMP) options")
    case pairing(peer: String, method: String, passkey: String?, number: String?)
    case paired(peer: String, method: String, secureConnections: Bool, mitm: Bool, keySize: Int, bonded: Bool)
    case encrypted(keySize: Int, fromBond: Bool)
    case pairingFailed(reason: String, code: String, byPeer: Bool)

    func text(_ language: Language) -> String {
        switch language {
        case .english: return english
        case .simplifiedChinese: return simplifiedChinese
        }
    }

    private var english: String {
        switch self {
        case let .seeHelp(message, hint): return "\(message) (see '\(hint)')"
        case .noCommand: return "no command given"
        case .unknownCommand(let c): return "unknown command '\(c)'"
        case .unknownOption(let o): return "unknown option \(o)"
        case .optionNeedsValue(let o): return "option \(o) needs a value"
        case .langValue(let v): return "--lang takes en or zh-Hans, got '\(v)'"
        case .demoAdvertiseStep: return "Peripheral: add the demo services and advertise"
        case .demoScanStep: return "Central: power on and scan"
        case .demoConnectStep: return "Central: connect"
        case .demoMTUStep: return "Central: exchange MTU"
        case .demoDiscoverStep: return "Central: discover services, characteristics and descriptors, read what is readable"
        case .demoWriteStep: return "Central: write fff2, then read it back"
        case .demoRefusedWriteStep: return "Central: a write the peripheral refuses"
        case .demoRefusedReadStep: return "Central: a read the peripheral refuses"
        case .demoSubscribeStep: return "Central: subscribe to fff1 and receive 3 notifications"
        case .demoDisconnectStep: return "Central: unsubscribe and disconnect"
        case .demoMTUCoreBluetooth: return "(automatic in CoreBluetooth; peripheral.maximumWriteValueLength(for:) shows the result)"
        case .demoAdvertising: return "advertising as \"ble-hci\" with services fff0, ffe0"
        case .demoPeripheralSubscribed(let uuid): return "[peripheral] a central subscribed to \(uuid)"
        case let .demoPeripheralWrote(value, uuid): return "[peripheral] a central wrote \(value) to \(uuid)"
        case let .demoFound(name, address, rssi): return "found \(name) at \(address) RSSI \(rssi.map { "\($0) dBm" } ?? "?")"
        case let .demoConnected(handle, mtu): return "connected, handle \(handle), ATT MTU \(mtu)"
        case let .demoNowReads(uuid, value): return "\(uuid) now reads \(value)"
        case .demoNotification(let value): return "notification: \(value)"
        case let .demoCaptures(central, peripheral):
            return "\nCaptures written to \(central) (central) and \(peripheral) (peripheral): open them in Wireshark, or run 'ble-hci dump \(central)', or 'ble-hci dump \(central) --flow' for the sequence diagram."
        case .demoUnexpectedDatabase: return "the demo peripheral's database is not what the demo expects"
        case let .attRefused(write, uuid, handle, error, code): return "\(write ? "write" : "read") \(uuid) (handle \(handle)) refused: \(error) (\(code))"
        case let .localController(address, transport): return "Local controller \(address) (public) on \(transport)"
        case let .scanning(passive, duration): return "Scanning (\(passive ? "passive" : "active"))\(duration.map { " for \($0)" } ?? ", Ctrl-C to stop")…"
        case .scanEnded(let n): return "Scan ended: \(n) advertiser\(n == 1 ? "" : "s") seen"
        case .advertisingEvents(let n): return "\(n) advertising event\(n == 1 ? "" : "s")"
        case let .advertisingInterval(median, shortest): return "interval \(median) ms (shortest \(shortest) ms)"
        case let .rssiRange(lo, hi): return lo == hi ? "RSSI \(lo) dBm" : "RSSI \(lo) to \(hi) dBm"
        case .listSeparator: return ", "
        case .nameContaining(let name): return "a name containing \"\(name)\""
        case .opening(let t): return "Opening \(t)…"
        case let .scanningFor(target, timeout): return "Scanning for \(target) (up to \(timeout))…"
        case let .connectingTo(address, timeout): return "Connecting to \(address) (up to \(timeout))…"
        case let .connectedTo(address, handle, mtu): return "Connected to \(address) (handle \(handle)), ATT MTU \(mtu)"
        case let .disconnected(reason, code): return "Disconnected: \(reason) (\(code))"
        case let .readValue(what, value): return "read \(what) = \(value)"
        case let .wroteValue(value, what, withResponse): return "wrote \(value) to \(what)\(withResponse ? "" : " (without response)")"
        case let .subscribedTo(uuid, indications, count, duration):
            return "subscribed to \(uuid) (\(indications ? "indications" : "notifications"))" + (count.map { ", waiting for \($0)" } ?? "") + (duration.map { ", for \($0)" } ?? "")
        case let .received(time, indication, uuid, value): return "\(time) \(indication ? "indication" : "notification") \(uuid) = \(value)"
        case let .peripheralRefused(op, target, error, code): return "the peripheral refused \(op) \(target): \(error) (\(code))"
        case .noSuchCharacteristic(let ref): return "the peripheral has no characteristic \(ref): run with --discover to see what it has"
        case let .noAdvertiserMatched(target, within, seen):
            return "no advertiser matched \(target) within \(within)" + (seen.isEmpty ? " (none seen at all: is anything advertising?)" : "; seen: " + seen)
        case let .couldNotConnect(address, error): return "could not connect to \(address): \(error)"
        case let .advertisingAs(name, address, type, profile, transport):
            return "Advertising as \(name) (\(address), \(type)) with profile \(profile) on \(transport). Ctrl-C to stop."
        case let .privacy(address, identity): return "Privacy: resolvable private address \(address), identity \(identity)"
        case let .centralConnected(time, central, handle): return "\(time) connected: \(central) (handle \(handle))"
        case let .centralDisconnected(time, handle, reason, code): return "\(time) disconnected (handle \(handle)): \(reason) (\(code)); advertising again"
        case let .centralSubscribed(time, uuid, indications): return "\(time) subscribed to \(uuid) (\(indications ? "indications" : "notifications"))"
        case let .centralUnsubscribed(time, uuid): return "\(time) unsubscribed from \(uuid)"
        case let .centralWrote(time, uuid, value): return "\(time) write \(uuid) = \(value)"
        case let .centralRead(time, uuid): return "\(time) read \(uuid)"
        case .advBonded: return "bonded "
        case .advConnectable(let yes): return yes ? "connectable" : "non-connectable"
        case .advServices(let list): return "services: \(list)"
        case let .advManufacturer(company, data): return "manufacturer \(company): \(data)"
        case let .advServiceData(uuid, data): return "service data \(uuid): \(data)"
        case .advTxPower(let dBm): return "tx \(dBm) dBm"
        case .advAppearance(let name): return "appearance: \(name)"
        case .treeService(let uuid): return "Service \(uuid)"
        case let .treeHandles(start, end): return "handles \(start)-\(end)"
        case .treeCharacteristic(let uuid): return "Characteristic \(uuid)"
        case let .treeCharacteristicHandles(declaration, value): return "handle \(declaration), value \(value)"
        case .treeValue: return "value: "
        case .treeNotReadable(let error): return "not readable: \(error)"
        case .treeDescriptor(let uuid): return "Descriptor \(uuid)"
        case .treeHandle(let handle): return "handle \(handle)"
        case let .pairing(peer, method, passkey, number):
            return "pairing with \(peer): \(method)" + (passkey.map { ", passkey \($0) (type it on the other device)" } ?? "")
                + (number.map { ", compare the number \($0)" } ?? "")
        case let .paired(peer, method, sc, mitm, keySize, bonded):
            return "paired with \(peer): \(method), \(sc ? "LE Secure Connections" : "LE legacy"), "
                + "\(mitm ? "authenticated (MITM)" : "unauthenticated"), key size \(keySize)\(bonded ? ", bonded" : ", not bonded")"
        case let .encrypted(keySize, fromBond): return "encrypted (key size \(keySize)\(fromBond ? ", from the bond" : ""))"
        case let .pairingFailed(reason, code, byPeer): return "pairing failed: \(reason) (\(code))\(byPeer ? ", said the peer" : "")"
        }
    }

    // Terms as in the glossary (docs/glossary.zh-Hans.md): central 中心设备, peripheral 外设,
    // characteristic 特征, notification 通知, indication 指示, pairing 配对, bonding 绑定.
    private var simplifiedChinese: String {
        switch self {
        case let .seeHelp(message, hint): return "\(message)（参见 '\(hint)'）"
        case .noCommand: return "没有给出命令"
        case .unknownCommand(let c): return "未知命令 '\(c)'"
        case .unknownOption(let o): return "未知选项 \(o)"
        case .optionNeedsValue(let o): return "选项 \(o) 需要一个值"
        case .langValue(let v): return "--lang 只接受 en 或 zh-Hans，收到的是 '\(v)'"
        case .demoAdvertiseStep: return "外设：添加演示服务并开始广播"
        case .demoScanStep: return "中心设备：上电并扫描"
        case .demoConnectStep: return "中心设备：连接"
        case .demoMTUStep: return "中心设备：交换 MTU"
        case .demoDiscoverStep: return "中心设备：发现服务、特征和描述符，读取所有可读的值"
        case .demoWriteStep: return "中心设备：写 fff2，再读回来"
        case .demoRefusedWriteStep: return "中心设备：一次被外设拒绝的写"
        case .demoRefusedReadStep: return "中心设备：一次被外设拒绝的读"
        case .demoSubscribeStep: return "中心设备：订阅 fff1，接收 3 个通知"
        case .demoDisconnectStep: return "中心设备：取消订阅并断开连接"
        case .demoMTUCoreBluetooth: return "（CoreBluetooth 自动完成；结果见 peripheral.maximumWriteValueLength(for:)）"
        case .demoAdvertising: return "以 \"ble-hci\" 为名广播，带服务 fff0、ffe0"
        case .demoPeripheralSubscribed(let uuid): return "[外设] 一个中心设备订阅了 \(uuid)"
        case let .demoPeripheralWrote(value, uuid): return "[外设] 一个中心设备向 \(uuid) 写入了 \(value)"
        case let .demoFound(name, address, rssi): return "发现 \(name)，地址 \(address)，RSSI \(rssi.map { "\($0) dBm" } ?? "?")"
        case let .demoConnected(handle, mtu): return "已连接，连接句柄 \(handle)，ATT MTU \(mtu)"
        case let .demoNowReads(uuid, value): return "\(uuid) 现在读出 \(value)"
        case .demoNotification(let value): return "通知：\(value)"
        case let .demoCaptures(central, peripheral):
            return "\n抓包已写入 \(central)（中心设备）和 \(peripheral)（外设）：可用 Wireshark 打开，或运行 'ble-hci dump \(central)'，或用 'ble-hci dump \(central) --flow' 看时序图。"
        case .demoUnexpectedDatabase: return "演示外设的数据库与演示预期的不一致"
        case let .attRefused(write, uuid, handle, error, code): return "\(write ? "写" : "读") \(uuid)（句柄 \(handle)）被拒绝：\(error)（\(code)）"
        case let .localController(address, transport): return "本地控制器 \(address)（公共地址），经由 \(transport)"
        case let .scanning(passive, duration): return "正在\(passive ? "被动" : "主动")扫描\(duration.map { "，持续 \($0)" } ?? "，按 Ctrl-C 停止")…"
        case .scanEnded(let n): return "扫描结束：共发现 \(n) 个广播者"
        case .advertisingEvents(let n): return "\(n) 个广播事件"
        case let .advertisingInterval(median, shortest): return "间隔 \(median) ms（最短 \(shortest) ms）"
        case let .rssiRange(lo, hi): return lo == hi ? "RSSI \(lo) dBm" : "RSSI \(lo) 到 \(hi) dBm"
        case .listSeparator: return "，"
        case .nameContaining(let name): return "名称包含 \"\(name)\" 的设备"
        case .opening(let t): return "正在打开 \(t)…"
        case let .scanningFor(target, timeout): return "正在扫描寻找\(spaced(target))（最多 \(timeout)）…"
        case let .connectingTo(address, timeout): return "正在连接 \(address)（最多 \(timeout)）…"
        case let .connectedTo(address, handle, mtu): return "已连接 \(address)（连接句柄 \(handle)），ATT MTU \(mtu)"
        case let .disconnected(reason, code): return "已断开连接：\(reason)（\(code)）"
        case let .readValue(what, value): return "读 \(what) = \(value)"
        case let .wroteValue(value, what, withResponse): return "已向 \(what) 写入 \(value)\(withResponse ? "" : "（无响应写）")"
        case let .subscribedTo(uuid, indications, count, duration):
            return "已订阅 \(uuid)（\(indications ? "指示" : "通知")）" + (count.map { "，等待 \($0) 个" } ?? "") + (duration.map { "，持续 \($0)" } ?? "")
        case let .received(time, indication, uuid, value): return "\(time) \(indication ? "指示" : "通知") \(uuid) = \(value)"
        case let .peripheralRefused(op, target, error, code): return "外设拒绝了 \(op) \(target)：\(error)（\(code)）"
        case .noSuchCharacteristic(let ref): return "外设没有特征 \(ref)：加 --discover 运行可看到它有哪些"
        case let .noAdvertiserMatched(target, within, seen):
            return "\(within) 内没有与\(spaced(target))匹配的广播者" + (seen.isEmpty ? "（一个也没看到：有设备在广播吗？）" : "；看到的有：" + seen)
        case let .couldNotConnect(address, error): return "无法连接 \(address)：\(error)"
        case let .advertisingAs(name, address, type, profile, transport):
            return "正在以 \(name) 为名广播（\(address)，\(type)），配置文件 \(profile)，经由 \(transport)。按 Ctrl-C 停止。"
        case let .privacy(address, identity): return "隐私：可解析私有地址 \(address)，身份地址 \(identity)"
        case let .centralConnected(time, central, handle): return "\(time) 已连接：\(central)（连接句柄 \(handle)）"
        case let .centralDisconnected(time, handle, reason, code): return "\(time) 已断开（连接句柄 \(handle)）：\(reason)（\(code)）；重新开始广播"
        case let .centralSubscribed(time, uuid, indications): return "\(time) 已订阅 \(uuid)（\(indications ? "指示" : "通知")）"
        case let .centralUnsubscribed(time, uuid): return "\(time) 已取消订阅 \(uuid)"
        case let .centralWrote(time, uuid, value): return "\(time) 写 \(uuid) = \(value)"
        case let .centralRead(time, uuid): return "\(time) 读 \(uuid)"
        case .advBonded: return "已绑定 "
        case .advConnectable(let yes): return yes ? "可连接" : "不可连接"
        case .advServices(let list): return "服务：\(list)"
        case let .advManufacturer(company, data): return "厂商 \(company)：\(data)"
        case let .advServiceData(uuid, data): return "服务数据 \(uuid)：\(data)"
        case .advTxPower(let dBm): return "发射功率 \(dBm) dBm"
        case .advAppearance(let name): return "外观：\(name)"
        case .treeService(let uuid): return "服务 \(uuid)"
        case let .treeHandles(start, end): return "句柄 \(start)-\(end)"
        case .treeCharacteristic(let uuid): return "特征 \(uuid)"
        case let .treeCharacteristicHandles(declaration, value): return "声明句柄 \(declaration)，值句柄 \(value)"
        case .treeValue: return "值："
        case .treeNotReadable(let error): return "不可读：\(error)"
        case .treeDescriptor(let uuid): return "描述符 \(uuid)"
        case .treeHandle(let handle): return "句柄 \(handle)"
        case let .pairing(peer, method, passkey, number):
            return "正在与 \(peer) 配对：\(method)" + (passkey.map { "，配对码 \($0)（请在另一台设备上输入）" } ?? "")
                + (number.map { "，请核对数字 \($0)" } ?? "")
        case let .paired(peer, method, sc, mitm, keySize, bonded):
            return "已与 \(peer) 配对：\(method)，\(sc ? "LE 安全连接 (LE Secure Connections)" : "LE 传统配对 (LE legacy)")，"
                + "\(mitm ? "已认证 (MITM)" : "未认证")，密钥长度 \(keySize)\(bonded ? "，已绑定" : "，未绑定")"
        case let .encrypted(keySize, fromBond): return "已加密（密钥长度 \(keySize)\(fromBond ? "，使用绑定的密钥" : "")）"
        case let .pairingFailed(reason, code, byPeer): return "配对失败：\(reason)（\(code)）\(byPeer ? "，对端报告" : "")"
        }
    }
}

/// `text` set off by a space on each side where it meets Chinese with a Latin character (an
/// address), not where it starts or ends with a Chinese one ("名称包含 … 的设备").
private func spaced(_ text: String) -> String {
    (text.first?.isASCII == true ? " " : "") + text + (text.last?.isASCII == true ? " " : "")
}

/// The language the user asked for: `--lang`, else the locale (LC_ALL, LC_MESSAGES, LANG).
func chosenLanguage(_ args: ParsedArguments, environment: [String: String]) throws -> Language {
    guard let value = args.last("lang") else { return Language(environment: environment) }
    guard let language = Language(option: value) else { throw UsageError(Message.langValue(value).text(.english)) }
    return language
}
