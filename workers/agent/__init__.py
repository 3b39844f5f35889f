"""The reference worker: an agent loop against an OpenAI-compatible chat-completions API, run inside a
box. Standard library only; it reaches everything (the model included) through the gateway named in the
proxy environment and holds only sentinels, never a real credential."""
