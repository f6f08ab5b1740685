import Foundation
import Testing
import TestSupport
import Decoder

extension CLITests {
    /// Issue #28: the CLI's human text in English or Simplified Chinese, chosen by `--lang` or
    /// the locale (POSIX XBD 8.2: LC_ALL, then LC_MESSAGES, then LANG); JSON never changes. The
    /// expected lines are written here from what each message means (docs/glossary.zh-Hans.md
    /// for the terms); the demo's fixed values come from its profile and virtual link: address
    /// F0:F1:F2:F3:F4:01, handle 64, MTU 517 (the demo's request; Core v5.4 Vol 3 Part F
    /// 3.4.2), ffe1 read-only → Write Not Permitted 0x03, fff1 notify-only → Read Not Permitted
    /// 0x02 (Vol 3 Part F 3.4.1.1), a local disconnection → 0x16 (Vol 1 Part F 2.22).
    @Suite(.serialized) struct Language {
        static let chinese = ["LC_ALL": "", "LC_MESSAGES": "", "LANG": "zh_CN.UTF-8"]

        static let demoStepsChinese = [
            "── 1. 外设：添加演示服务并开始广播",
            "── 2. 中心设备：上电并扫描",
            "── 3. 中心设备：连接",
            "── 4. 中心设备：交换 MTU",
            "── 5. 中心设备：发现服务、特征和描述符，读取所有可读的值",
            "── 6. 中心设备：写 fff2，再读回来",
            "── 7. 中心设备：一次被外设拒绝的写",
            "── 8. 中心设备：一次被外设拒绝的读",
            "── 9. 中心设备：订阅 fff1，接收 3 个通知",
            "── 10. 中心设备：取消订阅并断开连接",
        ]
        static let demoStepsEnglish = [
            "── 1. Peripheral: add the demo services and advertise",
            "── 2. Central: power on and scan",
            "── 3. Central: connect",
            "── 4. Central: exchange MTU",
            "── 5. Central: discover services, characteristics and descriptors, read what is readable",
            "── 6. Central: write fff2, then read it back",
            "── 7. Central: a write the peripheral refuses",
            "── 8. Central: a read the peripheral refuses",
            "── 9. Central: subscribe to fff1 and receive 3 notifications",
            "── 10. Central: unsubscribe and disconnect",
        ]
        /// The result lines (▸ done, ✗ refused); `N` stands for the notified digits (the
        /// peripheral sends the current second).
        static let demoResultsChinese = [
            #"   ▸ 以 "ble-hci" 为名广播，带服务 fff0、ffe0"#,
            "   ▸ 发现 ble-hci，地址 F0:F1:F2:F3:F4:01/public，RSSI -50 dBm",
            "   ▸ 已连接，连接句柄 64，ATT MTU 517",
            #"   ▸ fff2 现在读出 "hello from the demo" (68656c6c6f2066726f6d207468652064656d6f)"#,
            "   ✗ 写 ffe1（句柄 23）被拒绝：Write Not Permitted（0x03）",
            "   ✗ 读 fff1（句柄 16）被拒绝：Read Not Permitted（0x02）",
            #"   ▸ 通知："N" (N)"#, #"   ▸ 通知："N" (N)"#, #"   ▸ 通知："N" (N)"#,
            "   ▸ 已断开连接：Connection Terminated By Local Host（0x16）",
        ]
        static let demoResultsEnglish = [
            #"   ▸ advertising as "ble-hci" with services fff0, ffe0"#,
            "   ▸ found ble-hci at F0:F1:F2:F3:F4:01/public RSSI -50 dBm",
            "   ▸ connected, handle 64, ATT MTU 517",
            #"   ▸ fff2 now reads "hello from the demo" (68656c6c6f2066726f6d207468652064656d6f)"#,
            "   ✗ write ffe1 (handle 23) refused: Write Not Permitted (0x03)",
            "   ✗ read fff1 (handle 16) refused: Read Not Permitted (0x02)",
            #"   ▸ notification: "N" (N)"#, #"   ▸ notification: "N" (N)"#, #"   ▸ notification: "N" (N)"#,
            "   ▸ Disconnected: Connection Terminated By Local Host (0x16)",
        ]

        /// The demo's step headings and result lines, digits of notified values replaced by N.
        static func demoLines(_ r: BleHCI.Result) -> (steps: [String], results: [String]) {
            let steps = r.stdout.filter { $0.hasPrefix("── ") }
            let results = r.stdout.filter { $0.hasPrefix("   ▸ ") || $0.hasPrefix("   ✗ ") }.map {
                $0.replacingOccurrences(of: #""\d\d" \(3\d3\d\)"#, with: #""N" (N)"#, options: .regularExpression)
            }
            return (steps, results)
        }

        /// The demo in Chinese, then its capture drawn by `dump --flow` in Chinese.
        @Test func demoAndFlowInChineseFromLANG() async throws {
            let dir = try TempDir()
            let path = dir.path("demo.pcap")
            let r = try await BleHCI.run(["demo", "-w", path], timeout: 30, environment: Self.chinese)
            expectStatus(r, 0, "LANG=zh_CN.UTF-8 ble-hci demo")
            let (steps, results) = Self.demoLines(r)
            #expect(steps == Self.demoStepsChinese)
            #expect(results == Self.demoResultsChinese)
            try await Self.checkFlowInChinese(path)
        }

        /// `--lang en` wins over a Chinese locale.
        @Test func demoInEnglishWithLangOption() async throws {
            let r = try await BleHCI.run(["--lang", "en", "demo"], timeout: 30, environment: Self.chinese)
            expectStatus(r, 0, "LANG=zh_CN.UTF-8 ble-hci --lang en demo")
            let (steps, results) = Self.demoLines(r)
            #expect(steps == Self.demoStepsEnglish)
            #expect(results == Self.demoResultsEnglish)
        }

        /// POSIX precedence: LC_ALL over LC_MESSAGES over LANG; zh_SG and zh_Hans are
        /// Simplified Chinese, zh_TW (Traditional) is not.
        @Test(arguments: [
            (["LC_ALL": "C", "LC_MESSAGES": "zh_CN.UTF-8", "LANG": "zh_CN.UTF-8"], false),
            (["LC_ALL": "", "LC_MESSAGES": "zh_SG.UTF-8", "LANG": "en_US.UTF-8"], true),
            (["LC_ALL": "", "LC_MESSAGES": "en_GB.UTF-8", "LANG": "zh_CN.UTF-8"], false),
            (["LC_ALL": "zh_Hans", "LC_MESSAGES": "", "LANG": "C"], true),
            (["LC_ALL": "", "LC_MESSAGES": "", "LANG": "zh_TW.UTF-8"], false),
        ])
        func localePrecedence(_ environment: [String: String], _ chinese: Bool) async throws {
            let r = try await BleHCI.run(["frobnicate"], environment: environment)
            #expect(r.status == 2)
            let expected = chinese ? "ble-hci: 未知命令 'frobnicate'（参见 'ble-hci --help'）\n"
                                   : "ble-hci: unknown command 'frobnicate' (see 'ble-hci --help')\n"
            #expect(r.stderr == expected, "\(environment)")
        }

        /// The commonest usage errors, and `--lang` itself.
        @Test func usageErrorsInChinese() async throws {
            let option = try await BleHCI.run(["--lang", "zh-Hans", "scan", "--frobnicate"])
            #expect(option.status == 2)
            #expect(option.stderr == "ble-hci: 未知选项 --frobnicate（参见 'ble-hci scan --help'）\n")
            let value = try await BleHCI.run(["--lang=zh-Hans", "scan", "--duration"])
            #expect(value.status == 2)
            #expect(value.stderr == "ble-hci: 选项 --duration 需要一个值（参见 'ble-hci scan --help'）\n")
            let none = try await BleHCI.run([], environment: Self.chinese)
            #expect(none.status == 2)
            #expect(none.stderr == "ble-hci: 没有给出命令（参见 'ble-hci --help'）\n")
            let bad = try await BleHCI.run(["--lang", "fr", "demo"])
            #expect(bad.status == 2)
            #expect(bad.stderr == "ble-hci: --lang takes en or zh-Hans, got 'fr' (see 'ble-hci --help')\n")
        }

        /// JSON is the same in every language: the application's events of `demo --json` (the
        /// trace's packets carry times, so they are left out) with the notified values masked,
        /// and the whole of `dump --json` and `dump --stats --json` of one capture.
        @Test func jsonIsTheSameInEveryLanguage() async throws {
            let dir = try TempDir()
            let path = dir.path("demo.pcap")
            func events(_ r: BleHCI.Result) -> [String] {
                r.stdout.filter { $0.hasPrefix("{\"event\"") }.map {
                    $0.replacingOccurrences(of: #""value":"3\d3\d""#, with: #""value":"N""#, options: .regularExpression)
                }
            }
            let zh = try await BleHCI.run(["demo", "--json", "-w", path], timeout: 30, environment: Self.chinese)
            let en = try await BleHCI.run(["--lang", "en", "demo", "--json"], timeout: 30)
            expectStatus(zh, 0, "demo --json (zh)")
            expectStatus(en, 0, "demo --json (en)")
            #expect(events(zh).count > 20)
            #expect(events(zh) == events(en))
            for args in [["dump", path, "--json"], ["dump", path, "--stats", "--json"]] {
                let a = try await BleHCI.run(args, environment: Self.chinese)
                let b = try await BleHCI.run(["--lang", "en"] + args)
                #expect(a.status == 0 && !a.stdout.isEmpty)
                #expect(a.stdout == b.stdout, "\(args)")
            }
        }

        /// Clock times → T, the demo's notified digits → N.
        static func masked(_ lines: [String]) -> [String] {
            lines.map {
                $0.replacingOccurrences(of: #"^\d\d:\d\d:\d\d\.\d{3} "#, with: "T ", options: .regularExpression)
                  .replacingOccurrences(of: #""\d\d" \(3\d3\d\)"#, with: #""N" (N)"#, options: .regularExpression)
            }
        }

        /// A zh-Hans `peripheral` (human lines) while an English central writes, reads,
        /// subscribes (the CCCD, Vol 3 Part G 3.3.3.3) and disconnects (0x13 Remote User
        /// Terminated Connection is what the peer of a local disconnection sees, Vol 1 Part F 2.19).
        @Test func peripheralInChinese() async throws {
            let (controllers, specs) = try await startControllers(2)
            defer { controllers.stop(grace: 1) }
            let p = try BleHCI.start(["-t", specs[0], "--lang", "zh-Hans", "peripheral", "--profile", "demo", "--duration", "30"], lifetime: 40)
            defer { p.stop(grace: 1) }
            try await p.until("the peripheral advertises") { p.output.contains { $0.hasPrefix("正在以 ble-hci 为名广播") } }
            let c = try await BleHCI.run(["-t", specs[1], "central", "name:ble-hci", "--write", "fff2=6869", "--read", "fff2",
                                          "--subscribe", "fff1", "--count", "1"])
            expectStatus(c, 0, "central against the zh-Hans peripheral")
            try await p.until("the peripheral reports the disconnection") { p.output.contains { $0.contains("已断开") } }
            let lines = Self.masked(p.output)
            #expect(lines.first == "正在以 ble-hci 为名广播（F0:F1:F2:F3:F4:01，public），配置文件 demo，经由 \(specs[0])。按 Ctrl-C 停止。")
            #expect(lines.contains { $0.hasPrefix("T 已连接：") && $0.hasSuffix("/public（连接句柄 64）") }, "\(lines)")
            for expected in [#"T 写 fff2 = "hi" (6869)"#, "T 读 fff2", "T 已订阅 fff1（通知）", "T 已取消订阅 fff1",
                             "T 已断开（连接句柄 64）：Remote User Terminated Connection（0x13）；重新开始广播"] {
                #expect(lines.contains(expected), "\(expected) not in \(lines)")
            }
        }

        /// `central` and `scan` against a `demo` peripheral on the virtual controllers, in both
        /// languages: what was written is read back (Core v5.4 Vol 3 Part F 3.4.5.1, 3.4.4.3),
        /// the CCCD write subscribes (Vol 3 Part G 3.3.3.3), fff1 notifies the current second.
        @Test func centralAndScanInBothLanguages() async throws {
            try await withRig { rig in
                let address = try #require(rig.advertising["address"] as? String) + "/public"
                let args = ["central", "name:ble-hci", "--write", "fff2=6869", "--read", "fff2", "--subscribe", "fff1", "--count", "1"]
                let zh = try await rig.central(["--lang", "zh-Hans"] + args)
                expectStatus(zh, 0, "central (zh-Hans)")
                #expect(Self.masked(zh.stdout.filter { !$0.isEmpty }) == [
                    "已连接 \(address)（连接句柄 64），ATT MTU 517",
                    #"已向 fff2 写入 "hi" (6869)"#,
                    #"读 fff2 = "hi" (6869)"#,
                    "已订阅 fff1（通知），等待 1 个",
                    #"T 通知 fff1 = "N" (N)"#,
                    "已断开连接：Connection Terminated By Local Host（0x16）",
                ])
                #expect(zh.stderr.contains("正在连接 \(address)（最多 10 s）…"), "\(zh.stderr)")
                let en = try await rig.central(["--lang", "en"] + args)
                expectStatus(en, 0, "central (en)")
                #expect(Self.masked(en.stdout.filter { !$0.isEmpty }) == [
                    "Connected to \(address) (handle 64), ATT MTU 517",
                    #"wrote "hi" (6869) to fff2"#,
                    #"read fff2 = "hi" (6869)"#,
                    "subscribed to fff1 (notifications), waiting for 1",
                    #"T notification fff1 = "N" (N)"#,
                    "Disconnected: Connection Terminated By Local Host (0x16)",
                ])
                #expect(en.stderr.contains("Connecting to \(address) (up to 10 s)…"), "\(en.stderr)")

                let scanZh = try await rig.central(["--lang", "zh-Hans", "scan", "--duration", "1"])
                expectStatus(scanZh, 0, "scan (zh-Hans)")
                #expect(scanZh.stdout.filter { !$0.isEmpty } == [#"\#(address)  -50 dBm  可连接  "ble-hci"  服务：fff0, ffe0"#])
                #expect(scanZh.stderr.contains("正在主动扫描，持续 1 s…\n") && scanZh.stderr.contains("扫描结束：共发现 1 个广播者\n"), "\(scanZh.stderr)")
                // The summary: the advertiser, how many of its advertising events were heard, their interval, the RSSI.
                #expect(scanZh.stderr.range(of: #"\n  \#(address) "ble-hci"，\d+ 个广播事件，间隔 \d+\.\d ms（最短 \d+\.\d ms），RSSI -50 dBm\n"#, options: .regularExpression) != nil, "\(scanZh.stderr)")
                let scanEn = try await rig.central(["--lang", "en", "scan", "--duration", "1"])
                expectStatus(scanEn, 0, "scan (en)")
                #expect(scanEn.stdout.filter { !$0.isEmpty } == [#"\#(address)  -50 dBm  connectable  "ble-hci"  services: fff0, ffe0"#])
                #expect(scanEn.stderr.contains("Scanning (active) for 1 s…\n") && scanEn.stderr.contains("Scan ended: 1 advertiser seen\n"), "\(scanEn.stderr)")
                #expect(scanEn.stderr.range(of: #"\n  \#(address) "ble-hci", \d+ advertising events, interval \d+\.\d ms \(shortest \d+\.\d ms\), RSSI -50 dBm\n"#, options: .regularExpression) != nil, "\(scanEn.stderr)")
                // A name target, as central's progress says it.
                let nameZh = try await rig.central(["--lang", "zh-Hans", "central", "name:ble-hci"])
                #expect(nameZh.stderr.contains(#"正在扫描寻找名称包含 "ble-hci" 的设备（最多 10 s）…"#), "\(nameZh.stderr)")
            }
        }

        /// `dump --flow` in zh-Hans: the summary and step titles are the catalog's, and the
        /// column titles are centred over their lanes counting a CJK ideograph (East Asian
        /// Width W, UAX #11) as two columns, so the lane bars of every row sit under them.
        static func checkFlowInChinese(_ path: String) async throws {
            let r = try await BleHCI.run(["--lang", "zh-Hans", "dump", path, "--flow"])
            expectStatus(r, 0, "dump --flow --lang zh-Hans")
            let head = try #require(r.stdout.first)
            #expect(head.wholeMatch(of: /\d+ 个包，\d+ 个步骤；列：主机协议栈 \| 控制器 \| F0:F1:F2:F3:F4:01 \(public\)/) != nil, "\(head)")
            #expect(r.stdout.contains("── 1. 上电 · CBCentralManager(delegate:queue:) → centralManagerDidUpdateState(.poweredOn)"))
            #expect(r.stdout.contains { $0.hasPrefix("── ") && $0.contains(". 发现服务 · peripheral.discoverServices(_:)") })
            #expect(r.stdout.contains { $0.hasPrefix("── ") && $0.contains(". 订阅 · peripheral.setNotifyValue(true, for:)") })
            // Columns by UAX #11: U+4E00–U+9FFF and U+3000–U+303F, U+FF00–U+FF60 are W/F.
            func width(_ c: Character) -> Int {
                let v = c.unicodeScalars.first!.value
                return (0x4E00...0x9FFF).contains(v) || (0x3000...0x303F).contains(v) || (0xFF00...0xFF60).contains(v) ? 2 : 1
            }
            func centre(of title: String, in line: String) -> Int? {
                guard let range = line.range(of: title) else { return nil }
                let start = line[..<range.lowerBound].reduce(0) { $0 + width($1) }
                return start + title.reduce(0) { $0 + width($1) } / 2
            }
            let columns = try #require(r.stdout.first { $0.hasPrefix("      #  时间 (秒)") })
            let row = try #require(r.stdout.first { $0.contains("HCI Command Reset") })
            let bars = row.enumerated().filter { "│├┤┼".contains($0.element) }.map(\.offset)  // the row is all narrow
            #expect(bars.count == 3)
            for (title, bar) in zip(["主机协议栈", "控制器", "F0:F1:F2:F3:F4:01"], bars) {
                let c = try #require(centre(of: title, in: columns), "\(title)")
                #expect(abs(c - bar) <= 1, "\(title) centred at column \(c), its lane at \(bar)")
            }
        }
    }

    /// `--help` and `COMMAND --help` in the language of the rest of the output (issue #28):
    /// only the prose is translated, so the Chinese help of every command names exactly the
    /// options the English one does; its lines fit a 100-column terminal counting East Asian
    /// wide characters as two (glibc's wcwidth, UAX #11), except the example command lines
    /// kept as typed; its terms are the glossary's (docs/glossary.zh-Hans.md).
    @Suite(.serialized) struct Help {
        static let english = ["LC_ALL": "", "LC_MESSAGES": "", "LANG": "C"]

        /// `--x` and `-x` as a help text names them (not `Ctrl-C`, `-50 dBm`, `0x05`).
        static func options(in text: String) -> Set<String> {
            let regex = try! NSRegularExpression(pattern: "(?<![A-Za-z0-9-])(--[a-z][a-z-]*[a-z]|-[A-Za-z])(?![A-Za-z0-9])")
            let range = NSRange(text.startIndex..., in: text)
            return Set(regex.matches(in: text, range: range).compactMap { Range($0.range, in: text).map { String(text[$0]) } })
        }

        static func help(_ arguments: [String], environment: [String: String] = english) async throws -> [String] {
            let r = try await BleHCI.run(arguments, environment: environment)
            expectStatus(r, 0, "ble-hci \(arguments.joined(separator: " "))")
            return r.stdout
        }

        static func isCJK(_ scalar: Unicode.Scalar) -> Bool { (0x4E00...0x9FFF).contains(scalar.value) }

        /// Every help (the main one, then each command the English main help lists) in both
        /// languages: the same options, Chinese prose, lines within 100 columns.
        @Test func everyHelpIsTranslatedWithTheSameOptions() async throws {
            let mainEnglish = try await Self.help(["--lang", "en", "--help"])
            let commands = CLITests.ManPageAndCompletions.commands(inMainHelp: mainEnglish)
            #expect(commands.count >= 12, "commands in --help: \(commands)")
            for command in [nil] + commands.map(Optional.some) {
                let args = (command.map { [$0] } ?? []) + ["--help"]
                let en = try await Self.help(["--lang", "en"] + args)
                let zh = try await Self.help(["--lang", "zh-Hans"] + args)
                let name = command ?? "(main)"
                #expect(en != zh, "\(name): the same text in both languages")
                let missing = Self.options(in: en.joined(separator: "\n")).subtracting(Self.options(in: zh.joined(separator: "\n")))
                let extra = Self.options(in: zh.joined(separator: "\n")).subtracting(Self.options(in: en.joined(separator: "\n")))
                #expect(missing.isEmpty && extra.isEmpty, "\(name): zh-Hans lacks \(missing.sorted()), adds \(extra.sorted())")
                let prose = zh.filter { $0.unicodeScalars.contains(where: Self.isCJK) }
                #expect(!prose.isEmpty && prose.count >= zh.count / 4, "\(name): too little Chinese (\(prose.count) of \(zh.count) lines)")
                let kept = Set(en.map { $0.trimmingCharacters(in: .whitespaces) })
                for line in zh where TextWidth.columns(of: line) > 100 {
                    #expect(kept.contains(line.trimmingCharacters(in: .whitespaces)),
                            "\(name): \(TextWidth.columns(of: line)) columns: \(line)")
                }
                if let command {
                    #expect(zh.contains { $0.hasPrefix("用法：ble-hci") && $0.contains(command) }, "\(name): no 用法 line")
                }
                #expect(zh.contains("示例：") || zh.contains { $0.hasSuffix("示例：") }, "\(name): no 示例")
            }
        }

        /// The locale chooses as POSIX orders it (XBD 8.2: LC_ALL, LC_MESSAGES, LANG; LANG=C is
        /// English), and --lang wins over it.
        @Test func theLocaleAndLangChooseTheLanguage() async throws {
            let zhByLocale = try await Self.help(["central", "--help"], environment: ["LC_ALL": "", "LC_MESSAGES": "", "LANG": "zh_CN.UTF-8"])
            let zhByOption = try await Self.help(["--lang", "zh-Hans", "central", "--help"])
            let enByLocale = try await Self.help(["central", "--help"])
            let enByOption = try await Self.help(["--lang", "en", "central", "--help"], environment: ["LC_ALL": "zh_CN.UTF-8"])
            #expect(zhByLocale.first?.hasPrefix("用法：ble-hci central TARGET...") == true, "\(zhByLocale.prefix(2))")
            #expect(zhByLocale == zhByOption)
            #expect(enByLocale.first?.hasPrefix("Usage: ble-hci central TARGET...") == true, "\(enByLocale.prefix(2))")
            #expect(enByLocale == enByOption)
            // `--help` after the command, and `-h`, as in English.
            #expect(try await Self.help(["central", "-h", "--lang=zh-Hans"]) == zhByOption)
            // The man page stays English whatever the locale (it is made from the English help).
            let man = try await Self.help(["--man"], environment: ["LC_ALL": "zh_CN.UTF-8"])
            #expect(!man.contains { $0.unicodeScalars.contains(where: Self.isCJK) })
        }

        /// The glossary's rows (Chinese term | spec term (section) | ...): the help uses the
        /// Chinese term with the spec's English term in parentheses where a learner meets it
        /// first, and none of the words the glossary warns against for central and
        /// peripheral (主机 alone means the host stack: 主机协议栈).
        @Test func theTermsAreTheGlossarys() async throws {
            let glossary = try String(contentsOf: Repo.root.appendingPathComponent("docs/glossary.zh-Hans.md"), encoding: .utf8)
            var terms: [String: String] = [:]  // spec term → Chinese
            for row in glossary.split(separator: "\n") where row.hasPrefix("| ") {
                let cells = row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
                guard cells.count >= 2, let english = cells[1].split(whereSeparator: { "（：".contains($0) }).first else { continue }
                terms[english.trimmingCharacters(in: .whitespaces)] = cells[0]
            }
            var all = try await Self.help(["--lang", "zh-Hans", "--help"])
            for command in ["central", "peripheral", "dump", "bonds", "scan"] {
                all += try await Self.help(["--lang", "zh-Hans", command, "--help"])
            }
            let text = all.joined(separator: "\n")
            for english in ["central", "peripheral", "attribute", "characteristic properties", "attribute permissions",
                            "notification", "indication", "pairing", "bonding", "profile", "controller", "scanning"] {
                let chinese = try #require(terms[english], "no glossary row for \(english)")
                let term = english == "attribute permissions" ? "permissions" : english
                #expect(["）", "，", "；"].contains { text.contains("\(chinese)（\(term)\($0)") }, "\(chinese)（\(term)） not in the help")
            }
            for wrong in ["从机", "从设备", "主设备"] { #expect(!text.contains(wrong), "\(wrong) in the help") }
            #expect(text.ranges(of: "主机").count == text.ranges(of: "主机协议栈").count, "主机 without 协议栈")
            // Two golden lines: the main help's list, and central's --subscribe.
            #expect(all.contains("  central       作为中心设备（central）连接外设（peripheral）：发现、读、写、订阅"))
            #expect(all.contains("                                    订阅通知（notification）或指示（indication），"))
        }

        /// The session's `help` (shell and `session`) in the language: the list and every
        /// command's help name the same options in both, the Chinese ones in Chinese; the JSON
        /// `help` event's text is the English one whatever the language.
        @Test func sessionHelpInBothLanguages() async throws {
            let (controllers, specs) = try await startControllers(1)
            defer { controllers.stop(grace: 1) }
            func session(_ lang: String, _ commands: [String], json: Bool = false) async throws -> [String] {
                let p = try BleHCI.start(["-t", specs[0], "--lang", lang, "session"] + (json ? ["--json"] : []), lifetime: 30)
                defer { p.stop(grace: 1) }
                let lines = json ? commands.enumerated().map { #"{"id":\#($0.offset),"line":"\#($0.element)"}"# } : commands
                try p.send((lines + [json ? #"{"id":"q","line":"quit"}"# : "quit"]).joined(separator: "\n") + "\n")
                #expect(try p.waitForExit(timeout: 15) == 0, "session --lang \(lang): \(p.stderr)")
                return p.output
            }
            /// Each `help X`'s block: from its usage line to the next one.
            func blocks(_ lines: [String], usage: String) -> [[String]] {
                let starts = lines.indices.filter { lines[$0].hasPrefix(usage) }
                return zip(starts, starts.dropFirst() + [lines.endIndex]).map { Array(lines[$0..<$1]) }
            }
            let listEnglish = try await session("en", ["help"])
            let heading = try #require(listEnglish.firstIndex { $0.hasPrefix("Commands (") }, "\(listEnglish)")
            let names = listEnglish[(heading + 1)...].prefix { $0.hasPrefix("  ") }.compactMap { $0.split(separator: " ").first.map(String.init) }
            #expect(names.count >= 20, "\(names)")
            let en = try await session("en", ["help"] + names.map { "help \($0)" })
            let zh = try await session("zh-Hans", ["help"] + names.map { "help \($0)" })
            let listChinese = zh.drop { !$0.hasPrefix("命令（`help COMMAND`") }.prefix { !$0.hasPrefix("用法：") }
            #expect(listChinese.filter { $0.hasPrefix("  ") }.count == names.count, "\(zh)")
            #expect(listChinese.contains { $0.hasPrefix("  unsubscribe CHAR [--link LINK]") && $0.hasSuffix("取消订阅（向 CCCD 写 0x0000）") }, "\(listChinese)")
            let enBlocks = blocks(en, usage: "Usage: "), zhBlocks = blocks(zh, usage: "用法：")
            #expect(enBlocks.count == names.count && zhBlocks.count == names.count, "\(enBlocks.count), \(zhBlocks.count) of \(names.count)")
            for (e, z) in zip(enBlocks, zhBlocks) {
                #expect(e.first?.dropFirst("Usage: ".count) == z.first?.dropFirst("用法：".count), "\(z.first ?? "")")
                #expect(Self.options(in: e.joined(separator: "\n")) == Self.options(in: z.joined(separator: "\n")), "\(z)")
                #expect(z.dropFirst().contains { $0.unicodeScalars.contains(where: Self.isCJK) }, "\(z)")
            }
            let json = try await session("zh-Hans", ["help read"], json: true)
            let event = try #require(json.compactMap(ChildProcess.json).first { $0["event"] as? String == "help" })
            #expect(event["text"] as? String == enBlocks.first { $0.first == "Usage: read CHAR [--link LINK]" }?.joined(separator: "\n"))
        }
    }
}
