"""The token core the tests pass to the text room where they do not compare the two.

SPAMSIFT_TOKENIZER=python (a second CI run of the tokenizer's tests) chooses the pure-Python
reference where the compiled core is built, as it does for a spamsift process (the Runtime of
the tests reads the same setting).
"""

from app.config import Settings
from app.text.core import resolve

TOKEN_CORE = resolve(Settings().tokenizer)
