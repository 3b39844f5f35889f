import sys

from workers.runtime.launch import main

raise SystemExit(main(sys.argv[1:]))
