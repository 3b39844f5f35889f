"""Agent presets (controlplane.agents; docs/presets.md): where the built-in ones are, and the limits on what
a preset or a worker's own environment may give a box."""

from controlplane.core.env import env
from controlplane.settings.base import BASE_DIR

# The built-in presets (<slug>/preset.toml), loaded on migrate and by `manage.py preset load`.
ROSTER_PRESETS_DIR = env.path("ROSTER_PRESETS_DIR", BASE_DIR / "workers" / "presets")
ROSTER_PRESET_FILE_MAX_BYTES = env.int("ROSTER_PRESET_FILE_MAX_BYTES", 256 * 1024, minimum=1)
ROSTER_PRESET_MAX_FILES = env.int("ROSTER_PRESET_MAX_FILES", 16, minimum=0)
ROSTER_PRESET_MAX_FILE_BYTES = env.int("ROSTER_PRESET_MAX_FILE_BYTES", 64 * 1024, minimum=0)
ROSTER_PRESET_MAX_ENV = env.int("ROSTER_PRESET_MAX_ENV", 64, minimum=0)
ROSTER_PRESET_MAX_ENV_VALUE_BYTES = env.int("ROSTER_PRESET_MAX_ENV_VALUE_BYTES", 4096, minimum=1)
# A prompt longer than this cannot be one argv element of a preset's command ({prompt}); such a preset
# should read {prompt_file} or take the prompt on stdin. Linux caps one argument at 128 KiB.
ROSTER_PRESET_PROMPT_ARG_MAX_BYTES = env.int("ROSTER_PRESET_PROMPT_ARG_MAX_BYTES", 100_000, minimum=1,
                                             maximum=128 * 1024)
