import Foundation
import Synchronization
import CWideChar

/// Terminal columns of text: East Asian wide and fullwidth characters take two, combining
/// marks none (Unicode UAX #11), as glibc's `wcwidth` says under a UTF-8 locale. The locale
/// is this thread's for the call only (`uselocale`): the process's stays as it was.
public enum TextWidth {
    /// The C.UTF-8 locale object, made once; used only under its lock (terminal text, not a
    /// hot path).
    private static let utf8 = Mutex<locale_t?>(newlocale(LC_CTYPE_MASK, "C.UTF-8", nil))

    /// Columns of one character (a grapheme cluster): its widest scalar, 0 for a control.
    public static func columns(of character: Character) -> Int {
        if let a = character.asciiValue { return a >= 0x20 && a < 0x7F ? 1 : 0 }
        return utf8.withLock { locale in
            guard let locale else { return 1 }
            let previous = uselocale(locale)
            defer { uselocale(previous) }
            return Swift.max(0, character.unicodeScalars.map { Int(wcwidth(wchar_t(bitPattern: $0.value))) }.max() ?? 0)
        }
    }

    public static func columns(of text: some StringProtocol) -> Int {
        text.reduce(0) { $0 + columns(of: $1) }
    }

    /// The longest start of `text` that takes at most `columns` columns (a wide character
    /// that would straddle the limit is left out).
    public static func prefix(_ text: String, columns limit: Int) -> String {
        var used = 0
        var end = text.startIndex
        for i in text.indices {
            used += columns(of: text[i])
            if used > limit { break }
            end = text.index(after: i)
        }
        return String(text[..<end])
    }
}
