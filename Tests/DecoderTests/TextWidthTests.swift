import Testing
import Decoder

/// Columns per Unicode's East Asian Width (UAX #11, EastAsianWidth.txt): Wide (W) and
/// Fullwidth (F) characters take two columns, Narrow/Halfwidth/Neutral one, and a combining
/// mark (general category Mn) adds none to the character it belongs to.
@Suite struct TextWidthTests {
    @Test(arguments: [
        ("a", 1), ("é", 1),                // U+00E9: Ambiguous, one column outside East Asian contexts
        ("e\u{0301}", 1),                   // e + COMBINING ACUTE ACCENT (Mn): one character, one column
        ("中", 2), ("属性", 4),             // U+4E2D, U+5C5E U+6027: W
        ("Ａ", 2),                          // U+FF21 FULLWIDTH LATIN CAPITAL LETTER A: F
        ("ｱ", 1),                           // U+FF71 HALFWIDTH KATAKANA LETTER A: H
        ("한", 2),                          // U+D55C Hangul syllable: W
        ("\u{07}", 0),                      // BEL: a control takes no column
        ("通知 notify", 11),
    ])
    func columns(_ text: String, _ expected: Int) {
        #expect(TextWidth.columns(of: text) == expected, "\(text.unicodeScalars.map { String($0.value, radix: 16) })")
    }
}
