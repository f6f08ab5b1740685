import Testing
import Decoder

/// Which language a locale means (issue #28). POSIX (XBD 8.2, "Internationalization
/// Variables"): LC_ALL overrides every LC_* variable, LC_MESSAGES decides messages, LANG is
/// the default; a variable set to the empty string counts as unset.
@Suite struct LanguageTests {
    @Test(arguments: [
        ("zh_CN.UTF-8", Language.simplifiedChinese), ("zh_CN", .simplifiedChinese), ("zh_CN.GB18030", .simplifiedChinese),
        ("zh_SG.UTF-8", .simplifiedChinese), ("zh_Hans", .simplifiedChinese), ("zh_CN.UTF-8@pinyin", .simplifiedChinese),
        ("zh_TW.UTF-8", .english), ("zh_HK.UTF-8", .english),  // Traditional Chinese: not this catalog
        ("C", .english), ("POSIX", .english), ("C.UTF-8", .english), ("en_US.UTF-8", .english), ("ja_JP.UTF-8", .english),
    ])
    func locale(_ name: String, _ expected: Language) {
        #expect(Language(locale: name) == expected, "\(name)")
    }

    @Test func posixPrecedence() {
        #expect(Language(environment: ["LC_ALL": "zh_CN.UTF-8", "LC_MESSAGES": "C", "LANG": "C"]) == .simplifiedChinese)
        #expect(Language(environment: ["LC_ALL": "C", "LC_MESSAGES": "zh_CN.UTF-8"]) == .english)
        #expect(Language(environment: ["LC_ALL": "", "LC_MESSAGES": "zh_CN.UTF-8", "LANG": "C"]) == .simplifiedChinese)
        #expect(Language(environment: ["LC_MESSAGES": "", "LANG": "zh_SG.UTF-8"]) == .simplifiedChinese)
        #expect(Language(environment: ["LANG": "en_GB.UTF-8"]) == .english)
        #expect(Language(environment: [:]) == .english)
        // LC_CTYPE alone does not choose the messages' language.
        #expect(Language(environment: ["LC_CTYPE": "zh_CN.UTF-8"]) == .english)
    }

    @Test func langOption() {
        #expect(Language(option: "en") == .english)
        #expect(Language(option: "zh-Hans") == .simplifiedChinese)
        #expect(Language(option: "zh-hans") == .simplifiedChinese)
        #expect(Language(option: "fr") == nil)
        #expect(Language(option: "") == nil)
    }

    /// Cutting to a number of columns never splits a wide character (UAX #11: 中 is W).
    @Test func prefixByColumns() {
        #expect(TextWidth.prefix("主机协议栈", columns: 5) == "主机")
        #expect(TextWidth.prefix("ab中c", columns: 3) == "ab")
        #expect(TextWidth.prefix("ab中c", columns: 4) == "ab中")
        #expect(TextWidth.prefix("abc", columns: 10) == "abc")
        #expect(TextWidth.prefix("abc", columns: 0) == "")
    }
}
