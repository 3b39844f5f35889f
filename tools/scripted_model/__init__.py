"""An offline, scripted stand-in for a model provider (OpenAI and Anthropic wire formats)."""
