"""The weather tool that the tool-calling tests offer, and
scripts/compare-tools-llama-server.py with them: the function itself, and
its Chat Completions (and Ollama) form; the Responses API takes the
function's fields at the top level, Anthropic's renames `parameters`."""

WEATHER_FUNCTION = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
WEATHER = {"type": "function", "function": WEATHER_FUNCTION}
