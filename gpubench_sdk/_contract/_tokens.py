"""Token counts as the model counts them, and where each stored count came from.

A token-priced request is billed by the server's own count, so that count is the one to keep:
``usage`` in an OpenAI-style answer, TGI's ``details``, whatever the provider read from the
server. Where the server gave none, a count is an estimate, and the stored request says which
estimate: the model's own tokenizer when the workload names one (``tokenizer``: a local
``tokenizer.json``, a folder holding one, or a Hugging Face model id already in the local
cache; never fetched over the network at run time), else whitespace-separated words (or, for a
stream, the chunks that arrived, as a provider may count them).

Each successful request of a token workload stores ``input_tokens_from`` and
``output_tokens_from`` in its detail: ``"server"``, ``"tokenizer"``, ``"words"`` or
``"chunks"``. A provider that counts by an estimate of its own says so by setting that key in
its ``Result.detail``; a count it gives without the key is taken to be the server's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .._base._errors import ConfigError
from .._base._types import Request, Result
from .._base._validate import whole_number

Units = tuple[int | None, int | None]

SERVER, TOKENIZER, WORDS, CHUNKS = "server", "tokenizer", "words", "chunks"
SIDES = ("input_tokens_from", "output_tokens_from")
"""The detail keys that say where a request's input and output token counts came from."""
_ESTIMATES = frozenset({WORDS, CHUNKS})
_INSTALL = "pip install 'gpubench-sdk[tokenizers]'"


class Tokenizer:
    """A model's tokenizer from local files (Hugging Face ``tokenizers``): ``count(text)`` is
    the number of tokens the model reads for ``text``, special tokens (BOS) not added, as a
    server's ``usage`` counts a prompt without its chat template."""

    def __init__(self, source: str | Path) -> None:
        try:
            from tokenizers import Tokenizer as _HfTokenizer
        except ImportError:
            raise ConfigError(
                "tokenizer", str(source), f"the tokenizers package: {_INSTALL}"
            ) from None
        path = _tokenizer_file(str(source))
        try:
            self._tokenizer = _HfTokenizer.from_file(str(path))
        except Exception as exc:  # tokenizers raises plain Exception for a malformed file
            raise ConfigError(
                "tokenizer", str(source), f"a readable tokenizer.json ({exc})"
            ) from None
        self.source = str(source)

    def __repr__(self) -> str:
        return f"Tokenizer({self.source!r})"

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def count_all(self, texts: Sequence[str]) -> int:
        """The tokens of several texts (one batch call: the Rust side spreads it)."""
        if not texts:
            return 0
        found = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return sum(len(e.ids) for e in found)


def _tokenizer_file(source: str) -> Path:
    """The ``tokenizer.json`` that ``source`` names: the file, a folder holding it, or a Hub
    model id in the local Hugging Face cache (looked up, never downloaded)."""
    path = Path(source).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            return path / "tokenizer.json"
        raise ConfigError("tokenizer", source, "a folder holding tokenizer.json")
    if source.count("/") == 1 and not source.startswith((".", "/", "~")):
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:
            cached = None
        else:
            found = try_to_load_from_cache(source, "tokenizer.json")
            cached = found if isinstance(found, str) else None
        if cached:
            return Path(cached)
        raise ConfigError(
            "tokenizer",
            source,
            "a model whose tokenizer.json is in the local Hugging Face cache (gpubench never "
            f"downloads at run time: `hf download {source} tokenizer.json` once), or a path to "
            "a tokenizer.json",
        )
    raise ConfigError("tokenizer", source, "a path to tokenizer.json (no such file)")


class _Counts(Protocol):
    @property
    def units(self) -> tuple[str, str]: ...

    @property
    def tokenizer(self) -> Tokenizer | None: ...

    def prompt_texts(self, request: Request) -> Sequence[str]: ...

    def answer_text(self, output: Any) -> str | None: ...


def counted(
    workload: _Counts, request: Request, result: Result, units: Units
) -> tuple[Units, dict[str, str]]:
    """The final units of a successful request of a token workload, and where each token count
    came from (``SIDES``): the server's where it gave one; else the workload's tokenizer on
    what was sent and what came back; else the provider's own estimate, or words."""
    marks: Mapping[str, Any] = result.detail or {}
    usage = result.output.get("usage") if isinstance(result.output, Mapping) else None
    if not isinstance(usage, Mapping):
        usage = {}
    given = (result.input_units, result.output_units)
    final = list(units)
    sources: dict[str, str] = {}
    for side, (key, unit) in enumerate(zip(SIDES, workload.units, strict=True)):
        if unit != "tokens":
            continue
        mark = marks.get(key)
        reported = whole_number(usage.get(("prompt_tokens", "completion_tokens")[side]))
        if mark is None and given[side] is not None:
            sources[key] = SERVER  # the provider's count, read from the server
        elif mark is None and reported is not None:
            final[side], sources[key] = reported, SERVER
        elif mark is not None and mark not in _ESTIMATES:
            sources[key] = str(mark)  # a provider's source we cannot improve on
        else:
            final[side], source = _estimate(workload, request, result, side, final[side])
            if final[side] is not None:  # the provider's own estimate keeps its name
                sources[key] = source if mark is None or source == TOKENIZER else str(mark)
    return (final[0], final[1]), sources


def _estimate(
    workload: _Counts, request: Request, result: Result, side: int, had: int | None
) -> tuple[int | None, str]:
    """A count the server did not give: the tokenizer's, else what the provider or ``read``
    counted (``had``), else the words."""
    tokenizer = workload.tokenizer
    if side == 0:
        texts = workload.prompt_texts(request)
        if tokenizer is not None:
            return tokenizer.count_all(texts), TOKENIZER
        return (sum(len(t.split()) for t in texts) if had is None else had), WORDS
    text = workload.answer_text(result.output)
    if tokenizer is not None and text is not None:
        return tokenizer.count(text), TOKENIZER
    if had is None and text is not None:
        return len(text.split()), WORDS
    return had, WORDS
