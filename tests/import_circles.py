#!/usr/bin/env python3
"""Import circles: file-level import cycles inside Bosun's Rust crates, production code only.

Each crate is read from lib.rs / main.rs down its `mod x;` tree (`x.rs`, `x/mod.rs`, `#[path]`);
items under `#[cfg(test)]` are blanked, files named `*tests.rs` or under `tests/` never read.

An edge A -> B: file A names something that lives in file B, by a `use` path (grouped, `self`,
`super`, `crate`, aliases, globs) or by a path in code (`crate::x`, `super::x`, `self::x`, or
`child::x` / `imported_name::x`). A path resolves to the deepest module it names (`crate::a::b::C`
-> `a::b` if that module exists, else `a`); inline `mod x {}` blocks belong to their file. If the
item after that module is itself imported there (`pub use child::Item`, any module-level `use`,
glob re-exports too), the edge goes where that import leads (up to four hops; into an external
crate: no edge). So `use super::Thing` points at the parent only if `Thing` is defined there, and
`pub use child::X` in a mod.rs is an edge mod.rs -> child. Not edges: `mod child;` itself, a `use`
of a bare module (what is used through it counts), external crates. Every strongly connected
component of more than one file is printed with its edges; exit status 1 if there is any.
"""
import re
import sys
from itertools import accumulate
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATES = ["controller/src/lib.rs", "controller/src/bin/bosun/main.rs", "devcluster/src/lib.rs",
          "devcluster/src/main.rs", "sdk-rust/src/lib.rs", "https/src/lib.rs"]
LITERALS = re.compile(r'//[^\n]*|/\*.*?\*/|(?<!\w)b?r(#*)".*?"\1|"(?:\\.|[^"\\])*"|\'(?:\\u\{\w*\}|\\.|[^\'\\])\'', re.S)
MOD = re.compile(r'\b(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])')
PATH = re.compile(r'(?<![\w:$.])([A-Za-z_]\w*)((?:\s*::\s*(?:[A-Za-z_]\w*|\*))+)')
DEFINES = r'\b(?:fn|struct|enum|trait|type|const|static|union|mod|macro_rules!)\s+{}\b'


def blank(text, a, b):
    return text[:a] + re.sub(r'[^\n]', ' ', text[a:b]) + text[b:]


def strip(src):
    """Comments, strings and char literals become spaces (newlines kept, so offsets keep lines)."""
    return re.sub(LITERALS, lambda m: re.sub(r'[^\n]', ' ', m.group()), src)


def item_end(text, i):
    """End of the item starting at i: its `;` or its closing `}` at depth 0."""
    depth = 0
    for j in range(i, len(text)):
        depth += (text[j] in '([{') - (text[j] in ')]}')
        if text[j] in ';}' and depth == 0:
            return j + 1
    return len(text)


def drop_cfg_test(text):
    while (m := re.search(r'#\[cfg\(test\)\]', text)):
        j = m.end()
        while (a := re.match(r'\s*#\[', text[j:])):  # further attributes on the same item
            j = item_end(text, j + a.end() - 1)
        text = blank(text, m.start(), item_end(text, j))
    return text


def expand_use(tree):
    """`a::{b, c::{self, d as e}, f::*}` -> [(segments, name it binds)]."""
    toks, out, pos = re.findall(r'::|[{},*]|\w+', tree), [], 0

    def walk(prefix):
        nonlocal pos
        segs = list(prefix)
        while pos < len(toks):
            t = toks[pos]
            pos += 1
            if t == '{':
                while pos < len(toks) and toks[pos] != '}':
                    walk(segs)
                    pos += toks[pos:pos + 1] == [',']
                pos += 1
                return
            if t == '*':
                out.append((segs + ['*'], '*'))
                return
            segs.append('::' if t == '::' else t)  # only a leading `::` gets here
            if t != '::' and toks[pos:pos + 1] != ['::']:
                break
            pos += t != '::'
        name = segs[-1]
        if toks[pos:pos + 1] == ['as']:
            name, pos = toks[pos + 1], pos + 2
        if segs[-1] == 'self':
            segs = segs[:-1]
            name = segs[-1] if name == 'self' else name
        out.append((segs, name))
    walk([])
    return out


class Crate:
    def __init__(self, root):
        self.files = {}    # module path (tuple) -> file
        self.texts = {}    # file -> (module path, stripped text, inline mods [(name, open, close)])
        self.depth = {}    # file -> brace depth after each offset
        self.imports = {}  # module path -> {bound name: segments, '*': [glob segments]}
        self.edges = {}    # (from file, to file) -> [how]
        self.base = (ROOT / root).parent
        self.load(ROOT / root, ())

    def load(self, path, modpath):
        text = drop_cfg_test(strip(path.read_text()))
        src_lines, inline = path.read_text().splitlines(), []
        self.files[modpath], subdir = path, path.parent
        if path.name not in ('lib.rs', 'main.rs', 'mod.rs'):
            subdir = path.parent / path.stem
        for m in MOD.finditer(text):
            name, kind = m.groups()
            if kind == '{':
                close = item_end(text, m.end() - 1)
                inline.append((name, m.end() - 1, close))
                outer = [n for n, a, b in inline if a < m.start() < b]
                self.files[modpath + tuple(outer) + (name,)] = path
                continue
            line = text.count('\n', 0, m.start())
            attrs = [l for l in src_lines[max(0, line - 3):line] if l.strip().startswith('#[')]
            at = next((re.search(r'path\s*=\s*"([^"]+)"', a) for a in attrs if 'path' in a), None)
            cands = [path.parent / at.group(1)] if at else [subdir / f'{name}.rs', subdir / name / 'mod.rs']
            child = next((c for c in cands if c.exists()), None)
            if child is None:
                print(f'warning: {path}: no file for mod {name}', file=sys.stderr)
            elif not (child.name.endswith('tests.rs') or 'tests' in child.relative_to(self.base).parts):
                self.load(child, modpath + (name,))
        self.texts[path] = (modpath, text, inline)
        self.depth[path] = [0] + list(accumulate((c == '{') - (c == '}') for c in text))

    def context(self, file, pos):
        """(module path at pos, whether pos is at that module's item level)."""
        modpath, _, inline = self.texts[file]
        around, depth = sorted((a, n) for n, a, b in inline if a < pos < b), self.depth[file]
        inner = depth[around[-1][0] + 1] if around else 0
        return modpath + tuple(n for _, n in around), depth[pos] == inner

    def resolve(self, segs, ctx, hops=0):
        """-> (deepest module named, remaining segments), or None for external paths."""
        if not segs or segs[0] == '::':
            return None
        bound = self.imports.get(ctx, {}).get(segs[0])
        if segs[0] == 'crate':
            base, rest = (), segs[1:]
        elif segs[0] in ('self', 'super'):
            base, rest = ctx, segs[segs[0] == 'self':]
            while rest and rest[0] == 'super':
                base, rest = base[:-1], rest[1:]
        elif ctx + (segs[0],) in self.files:
            base, rest = ctx, segs
        elif segs[0] != '*' and bound and hops < 4:  # a name this module imported (`use x::y;` then `y::z`)
            return self.resolve(bound + segs[1:], ctx, hops + 1)
        else:
            return None
        while rest and base + (rest[0],) in self.files:
            base, rest = base + (rest[0],), rest[1:]
        return base, rest

    def target(self, segs, ctx, hops=0):
        """The file where what `segs` names is defined, or None if outside the crate."""
        found = self.resolve(segs, ctx)
        if found is None:
            return None
        mod, rest = found
        item = rest[0] if rest and rest[0] not in ('*',) else None
        if item and hops < 4:
            names = self.imports.get(mod, {})
            if item in names:
                return self.target(names[item] + rest[1:], mod, hops + 1)
            here = self.texts[self.files[mod]][1]
            if not re.search(DEFINES.format(re.escape(item)), here):
                for glob in names.get('*', []):
                    inner = self.resolve(glob[:-1], mod)
                    if inner and not inner[1] and re.search(DEFINES.format(re.escape(item)),
                                                             self.texts[self.files[inner[0]]][1]):
                        return self.files[inner[0]]
        return self.files[mod]

    def scan(self):
        refs = []  # (file, ctx, segments, line, how)
        for file, (modpath, text, _) in list(self.texts.items()):
            for m in re.finditer(r'\buse\s+([^;]*);', text):
                ctx, top = self.context(file, m.start())
                line = text.count('\n', 0, m.start()) + 1
                for segs, name in expand_use(m.group(1)):
                    refs.append((file, ctx, segs, line, 'use '))
                    names = self.imports.setdefault(ctx, {'*': []})
                    if top and name == '*':
                        names['*'].append(segs)
                    elif top:
                        names.setdefault(name, segs)
                text = blank(text, m.start(), m.end())
            for m in PATH.finditer(text):
                ctx, _ = self.context(file, m.start())
                segs = [m.group(1)] + re.findall(r'[A-Za-z_]\w*|\*', m.group(2))
                bound = self.imports.get(ctx, {}).get(segs[0])
                if bound and (self.resolve(bound, ctx) or (0, ['external']))[1]:
                    continue  # `Verdict::Run` after `use super::peering::Verdict`: that `use` counts
                refs.append((file, ctx, segs, text.count('\n', 0, m.start()) + 1, ''))
        for file, ctx, segs, line, kind in refs:
            found = self.resolve(segs, ctx)
            if kind and found and not found[1]:
                continue  # `use a::b;` of a module: what counts is what is used through it
            dst = self.target(segs, ctx)
            if dst and dst != file:
                how = self.edges.setdefault((file, dst), {}).setdefault((line, kind + '::'.join(segs[:-1])), [])
                how += [segs[-1]] if segs[-1] not in how else []

    def circles(self):
        """Tarjan's strongly connected components with more than one file."""
        graph = {f: sorted({b for a, b in self.edges if a == f}) for f in self.texts}
        index, low, stack, on, out = {}, {}, [], set(), []

        def visit(v):
            index[v] = low[v] = len(index)
            stack.append(v), on.add(v)
            for w in graph[v]:
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = stack[stack.index(v):]
                del stack[stack.index(v):]
                on.difference_update(comp)
                out.extend([sorted(comp)] if len(comp) > 1 else [])
        for v in sorted(graph):
            if v not in index:
                visit(v)
        return sorted(out)


def main(only):
    """`only`: crate roots to look at (their folder's prefix, e.g. `controller`); all if empty."""
    rel = lambda path: str(path.relative_to(ROOT))  # noqa: E731
    found = 0
    for root in CRATES:
        if only and not any(str(root).startswith(o) for o in only):
            continue
        crate = Crate(root)
        crate.scan()
        circles = crate.circles()
        found += len(circles)
        print(f'== {root}: {len(crate.texts)} files, {len(crate.edges)} edges, {len(circles)} circle(s)')
        for n, comp in enumerate(circles, 1):
            print(f'  circle {n}: ' + ', '.join(rel(f) for f in comp))
            for (a, b), hows in sorted(crate.edges.items()):
                if a in comp and b in comp:
                    print(f'    {rel(a)} -> {rel(b)}')
                    for k, ((line, path), names) in enumerate(sorted(hows.items())):
                        last = names[0] if len(names) == 1 else '{' + ', '.join(names) + '}'
                        print(f'        L{line}: {path}::{last}' if k < 4 else f'        (+{len(hows) - 4} more)')
                        if k == 4:
                            break
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
