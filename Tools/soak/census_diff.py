"""What grew between two heap censuses of Tools/soak/census.c: the (type, allocation stack)
groups whose live blocks grew most, symbolized and demangled (docs/performance.md, "Soak").

    python3 Tools/soak/census_diff.py --bin .build/release/ble-hci BEFORE.txt AFTER.txt [--top 15]
    python3 Tools/soak/census_diff.py --bin .build/release/ble-hci --count ATTBearer,GATTClient FILE...

The first form prints the total growth, then for each group its growth in bytes and blocks,
the type of its blocks (a Swift object's metadata, "-" when the first word points into no
image) and the first frames of the allocation. The second prints a table of the live objects
of the named classes (by their type metadata) in each census, in the order given.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys


def tool(name: str) -> str:
    for candidate in (shutil.which(name), f"/opt/swift/usr/bin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    sys.exit(f"census_diff: {name} not found (it comes with the Swift toolchain)")


def load(path: str) -> tuple:
    """(header fields, {(word, frames): (blocks, bytes)})."""
    groups: dict = {}
    with open(path) as f:
        header = f.readline().split()
        for line in f:
            parts = line.split()
            key = (parts[2][len("word="):], tuple(parts[4:]))
            blocks, size = groups.get(key, (0, 0))
            groups[key] = (blocks + int(parts[0]), size + int(parts[1]))
    return header, groups


class Symbols:
    def __init__(self, binary: str):
        self.files = {os.path.basename(binary): binary}
        lib = os.path.join(os.path.dirname(os.path.dirname(tool("swift-demangle"))), "lib", "swift", "linux")
        for so in glob.glob(os.path.join(lib, "*.so")) + glob.glob("/lib/x86_64-linux-gnu/libc.so.6"):
            self.files.setdefault(os.path.basename(so), so)
        self.cache: dict = {}

    def demangle(self, names: list) -> list:
        out = subprocess.run([tool("swift-demangle"), "--simplified"], input="\n".join(names),
                             capture_output=True, text=True).stdout
        return out.strip().splitlines()

    def frame(self, where: str, data: bool = False) -> str:
        if where in self.cache:
            return self.cache[where]
        m = re.fullmatch(r"(.+)\+0x([0-9a-f]+)", where)
        if not m or m.group(1) not in self.files:
            return where
        # A return address points after its call: look up the byte before it.
        address = int(m.group(2), 16) - (0 if data else 1)
        lines = subprocess.run([tool("llvm-symbolizer"), f"--obj={self.files[m.group(1)]}",
                                "--no-inlines" if data else "--inlines", hex(address)],
                               capture_output=True, text=True).stdout.strip().splitlines()
        names = [l for i, l in enumerate(lines) if i % 2 == 0 and l and l != "??"]
        text = " <- ".join(self.demangle(names)) if names else where
        self.cache[where] = f"{m.group(1)}: {text}"
        return self.cache[where]


def growth(args, symbols: Symbols) -> None:
    (_, before), (_, after) = load(args.files[0]), load(args.files[1])
    rows = []
    for key in before.keys() | after.keys():
        b0, s0 = before.get(key, (0, 0))
        b1, s1 = after.get(key, (0, 0))
        if b1 != b0 or s1 != s0:
            rows.append((s1 - s0, b1 - b0, key))
    rows.sort(reverse=True)
    print(f"growth {sum(r[0] for r in rows):+d} bytes, {sum(r[1] for r in rows):+d} blocks "
          f"({args.files[0]} -> {args.files[1]})")
    for size, blocks, (word, frames) in rows[:args.top]:
        kind = "-" if word == "-" else symbols.frame(word, data=True).split(": ", 1)[-1]
        print(f"\n{size:+d} B {blocks:+d} blocks  {kind}")
        for f in frames[:args.frames]:
            print(f"    {symbols.frame(f)}")


def count(args, symbols: Symbols) -> None:
    wanted = args.count.split(",")
    nm = subprocess.run([tool("llvm-nm"), args.bin], capture_output=True, text=True).stdout
    metadata = {}
    for line in nm.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].endswith("CN"):
            name = symbols.demangle([parts[2]])[0].replace("type metadata for ", "")
            short = name.rsplit(".", 1)[-1]
            if short in wanted:
                metadata[f"{os.path.basename(args.bin)}+0x{int(parts[0], 16):x}"] = short
    print("| census | live blocks | live bytes | " + " | ".join(wanted) + " |")
    print("|---" * (len(wanted) + 3) + "|")
    for path in args.files:
        header, groups = load(path)
        live = dict.fromkeys(wanted, 0)
        for (word, _), (blocks, _) in groups.items():
            if word in metadata:
                live[metadata[word]] += blocks
        print(f"| {os.path.basename(path)} | {header[3]} | {header[5]} | "
              + " | ".join(str(live[w]) for w in wanted) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="the binary the census was taken of")
    parser.add_argument("--top", type=int, default=15, help="groups to show (default 15)")
    parser.add_argument("--frames", type=int, default=8, help="frames per group (default 8)")
    parser.add_argument("--count", help="comma list of class names: count their live objects")
    parser.add_argument("files", nargs="+", help="census files (two for the growth)")
    args = parser.parse_args()
    symbols = Symbols(args.bin)
    if args.count:
        count(args, symbols)
    elif len(args.files) == 2:
        growth(args, symbols)
    else:
        parser.error("give two census files (or --count with any number)")


if __name__ == "__main__":
    main()
