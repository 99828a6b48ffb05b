"""Check a local corpus folder against benchmarks/corpus/manifest.json.

    python benchmarks/corpus_check.py /work/corpus            # missing and extra files
    python benchmarks/corpus_check.py /work/corpus --hash     # also compare sha256
    python benchmarks/corpus_check.py /work/corpus --restore-from /work/.mirror

--restore-from copies each missing file out of fetched snapshots (`<dir>/<owner>+<repo>/repo`,
the layout the `fetch` tool leaves) with `git show <commit>:<path>`; see corpus_fetch.md.
Exit status: 0 when the folder matches the manifest, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "corpus" / "manifest.json"
SUFFIXES = (".py", ".ipynb")


def expected(manifest: dict) -> dict[Path, dict]:
    return {Path(entry["set"]) / entry["local"]: entry for entry in manifest["files"]}


def present(root: Path, sets: set[str]) -> set[Path]:
    found = set()
    for name in sets:
        for path in (root / name).rglob("*"):
            if path.is_file() and path.suffix in SUFFIXES:
                found.add(path.relative_to(root))
    return found


def restore(root: Path, relative: Path, entry: dict, mirrors: Path) -> str | None:
    """Copy one file out of a fetched snapshot; None when done, else why not."""
    source = entry.get("via", entry["repo"]).replace("/", "+")
    git = mirrors / source / "repo"
    if (git / ".git").is_dir():
        git = git / ".git"
    if not git.is_dir():
        return f"no snapshot at {git} (fetch github:{entry.get('via', entry['repo'])})"
    shown = subprocess.run(
        ["git", "-C", str(git), "show", f"{entry['commit']}:{entry['path']}"],
        capture_output=True,
        check=False,
    )
    if shown.returncode != 0:
        return shown.stderr.decode(errors="replace").strip() or "git show failed"
    target = root / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(shown.stdout)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    parser.add_argument("--hash", action="store_true", help="compare each file's sha256 too")
    parser.add_argument("--restore-from", type=Path, metavar="MIRRORS")
    args = parser.parse_args(argv)
    manifest = json.loads(args.manifest.read_text())
    wanted = expected(manifest)
    if args.restore_from is not None:
        for relative in sorted(set(wanted) - present(args.root, set(manifest["sets"]))):
            problem = restore(args.root, relative, wanted[relative], args.restore_from)
            if problem is not None:
                print(f"cannot restore {relative}: {problem}")
    found = present(args.root, set(manifest["sets"]))
    missing = sorted(set(wanted) - found)
    extra = sorted(found - set(wanted))
    changed = []
    if args.hash:
        for relative in sorted(set(wanted) & found):
            digest = hashlib.sha256((args.root / relative).read_bytes()).hexdigest()
            if digest != wanted[relative]["sha256"]:
                changed.append(relative)
    for label, paths in (("missing", missing), ("extra", extra), ("different", changed)):
        for path in paths:
            print(f"{label}: {path}")
    print(
        f"{len(wanted)} files in the manifest: {len(wanted) - len(missing)} present, "
        f"{len(missing)} missing, {len(extra)} extra"
        + (f", {len(changed)} with other contents" if args.hash else "")
    )
    return 1 if missing or extra or changed else 0


if __name__ == "__main__":
    sys.exit(main())
