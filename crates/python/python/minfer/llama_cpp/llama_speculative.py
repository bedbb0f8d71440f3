"""llama-cpp-python's prompt lookup decoding, as minfer's ``lookup``
speculation: the same tokens, sooner where the answer repeats the
prompt."""

from __future__ import annotations


class LlamaPromptLookupDecoding:
    """Guesses the next tokens from earlier occurrences of the last
    ``max_ngram_size`` tokens; at most ``num_pred_tokens`` a step."""

    def __init__(self, max_ngram_size: int = 2, num_pred_tokens: int = 10) -> None:
        self.max_ngram_size = max_ngram_size
        self.num_pred_tokens = num_pred_tokens
