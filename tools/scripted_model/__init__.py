"""An offline, scripted stand-in for a model provider (OpenAI, Anthropic and Gemini wire formats)."""
