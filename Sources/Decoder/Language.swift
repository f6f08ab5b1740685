/// The language of human-readable text (issue #28): English, or Simplified Chinese. JSON keys
/// and values, field names, event names and exit codes never depend on it.
public enum Language: String, Sendable, CaseIterable {
    case english = "en"
    case simplifiedChinese = "zh-Hans"

    /// `--lang VALUE`: "en" or "zh-Hans" (in any case); nil for anything else.
    public init?(option value: String) {
        guard let language = Language.allCases.first(where: { $0.rawValue.lowercased() == value.lowercased() }) else { return nil }
        self = language
    }

    /// A POSIX locale name: zh_CN*, zh_SG* and zh_Hans* are Simplified Chinese; everything else
    /// (zh_TW, zh_HK: Traditional; C, POSIX, en_US.UTF-8, …) is English.
    public init(locale: String) {
        let name = locale.lowercased()
        let simplified = ["zh_cn", "zh_sg", "zh_hans", "zh-hans", "zh-cn", "zh-sg"]
        self = simplified.contains { name == $0 || name.hasPrefix($0 + ".") || name.hasPrefix($0 + "@") || name.hasPrefix($0 + "_") }
            ? .simplifiedChinese : .english
    }

    /// The messages' locale as POSIX (XBD 8.2) chooses it: LC_ALL, else LC_MESSAGES, else LANG,
    /// the first one set and not empty; none: English.
    public init(environment: [String: String]) {
        let chosen = ["LC_ALL", "LC_MESSAGES", "LANG"].lazy.compactMap { environment[$0] }.first { !$0.isEmpty }
        self = chosen.map(Language.init(locale:)) ?? .english
    }
}
