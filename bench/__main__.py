"""`make bench`: runs every bench/bench_*.py module's main() in turn, each printing its own table.
`python -m bench NAME` runs only bench_NAME."""

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> int:
    wanted = set(sys.argv[1:])
    modules = pkgutil.iter_modules([str(Path(__file__).parent)])
    names = sorted(m.name for m in modules if m.name.startswith("bench_"))
    failed = 0
    for name in names:
        if wanted and name.removeprefix("bench_") not in wanted:
            continue
        print(f"\n=== {name} ===", flush=True)
        try:
            importlib.import_module(f"bench.{name}").main()
        except Exception as exc:  # noqa: BLE001 - one broken bench must not hide the others' numbers
            failed += 1
            print(f"{name} failed: {exc!r}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
