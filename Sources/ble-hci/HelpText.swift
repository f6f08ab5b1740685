import Decoder

/// What `--help` prints: the main help or one command's, in every Language (issue #28). Each
/// language is a switch over every topic with no `default`, so a command whose help lacks a
/// translation does not compile. The English texts also make `--man` and the completions.
enum HelpTopic: String, CaseIterable {
    case main
    case scan, central, peripheral, advertise, shell, session, bonds, dump, demo, controllers, proxy, adapters

    /// A command's help; nil for a name that is not a command.
    init?(command: String) {
        guard command != HelpTopic.main.rawValue, let topic = HelpTopic(rawValue: command) else { return nil }
        self = topic
    }

    func text(_ language: Language) -> String {
        switch language {
        case .english: return english
        case .simplifiedChinese: return simplifiedChinese
        }
    }

    private var english: String {
        switch self {
        case .main: return mainHelp
        case .scan: return scanHelp
        case .central: return centralHelp
        case .peripheral: return peripheralHelp
        case .advertise: return advertiseHelp
        case .shell: return shellHelp
        case .session: return sessionHelp
        case .bonds: return bondsHelp
        case .dump: return dumpHelp
        case .demo: return demoHelp
        case .controllers: return controllersHelp
        case .proxy: return proxyHelp
        case .adapters: return adaptersHelp
        }
    }

    private var simplifiedChinese: String {
        switch self {
        case .main: return mainHelpChinese
        case .scan: return scanHelpChinese
        case .central: return centralHelpChinese
        case .peripheral: return peripheralHelpChinese
        case .advertise: return advertiseHelpChinese
        case .shell: return shellHelpChinese
        case .session: return sessionHelpChinese
        case .bonds: return bondsHelpChinese
        case .dump: return dumpHelpChinese
        case .demo: return demoHelpChinese
        case .controllers: return controllersHelpChinese
        case .proxy: return proxyHelpChinese
        case .adapters: return adaptersHelpChinese
        }
    }
}

/// Each command's English help, by command name (the man page and completions read it).
let commandHelp: [String: String] = Dictionary(uniqueKeysWithValues: HelpTopic.allCases.compactMap { topic in
    topic == .main ? nil : (topic.rawValue, topic.text(.english))
})
