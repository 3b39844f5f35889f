"""`python -m tools.scripted_model --script FILE --key-file FILE [--port N] [--tls-cert C --tls-key K]`

Serves the script until killed. The key is read from a file (never the command line, which `ps` shows).
Prints one line `scripted model listening on http(s)://HOST:PORT` once it accepts connections."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.scripted_model.script import ScriptError, script_load
from tools.scripted_model.server import ScriptedModel, make_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.scripted_model",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--script", type=Path, required=True, help="the script file (JSON)")
    parser.add_argument("--key-file", type=Path, required=True, help="file holding the only accepted key")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls-cert", type=Path)
    parser.add_argument("--tls-key", type=Path)
    args = parser.parse_args(argv)
    try:
        script = script_load(args.script)
        key = args.key_file.read_text().strip()
        tls = (args.tls_cert, args.tls_key) if args.tls_cert and args.tls_key else None
        server = make_server(ScriptedModel(script, key), args.host, args.port, tls=tls)
    except (OSError, ScriptError, ValueError) as exc:
        print(f"scripted model: {exc}", file=sys.stderr)
        return 2
    scheme = "https" if tls else "http"
    print(f"scripted model listening on {scheme}://{args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
