"""An OpenAI-compatible server emulator on the testing kit's simulated fleet.

``POST /v1/chat/completions`` and ``/v1/completions`` (streamed as SSE or not), ``GET
/v1/models`` and ``GET /health``, served like vLLM's OpenAI server: a streamed answer sends its
headers at once, then one ``data:`` event per token, a usage chunk when
``stream_options.include_usage`` is set, then ``data: [DONE]``; a client that disconnects
aborts its request. Each request is a fleet job, so it queues for a worker and may wait for
one to boot. Time to first token is then queue + cold start + prefill, prefill taking
``prefill_ms_per_token`` per prompt token (prompt words count as tokens), after which tokens
come every ``1 / tokens_per_s`` seconds. The prefill is simulated as whole token intervals
(the fleet streams evenly spaced chunks), so it is rounded up to one.

With the kit's ``PrefixCache`` (``--prefix-cache``), prompts are cached the way vLLM's automatic
prefix caching does: in whole blocks of ``block_tokens``, each block known by its tokens and
all before it, so a request reuses the longest run of leading blocks an earlier prompt
computed, never its last token; only the rest is prefilled, and ``usage`` says how many were
reused in ``prompt_tokens_details.cached_tokens``. The cache is the server's (one replica's):
it empties when the fleet has scaled to zero, as a new replica starts with no KV cache.

``POST /v1/audio/transcriptions`` reads OpenAI's multipart upload (``file``, ``model``,
``language``, ``response_format``), takes ``audio_rtf`` seconds per second of audio (a real-time
factor: 0.05 is a Whisper-large GPU's pace) and answers ``speech_words_per_s`` words per second of
it, as ``{"text", "usage": {"type": "duration", "seconds"}}`` (``json``), the text alone
(``text``) or with ``duration``, ``language`` and ``segments`` (``verbose_json``). A WAV's
duration is read from its header; any other format's is estimated at 128 kbit/s.

``POST /v1/embeddings`` answers OpenAI's list of ``embedding`` objects, one per input (a string,
or an array of strings or of token ids), each a unit vector drawn from the input's text (the
same text, the same vector), ``embedding_dim`` long unless the body asks for fewer
``dimensions``, as floats or as ``encoding_format: "base64"`` (little-endian float32); the pass
over all the inputs' tokens takes ``prefill_ms_per_token`` each, and ``usage.prompt_tokens``
counts them (words, or the ids given).

A body carrying ``sleep_ms`` (the testing kit's echo probe, sent as extra fields) runs as the
kit defines: execution ``sleep_ms``, ``chunks`` tokens, the answer's text the job's ``echo``.
Faults in ``fleet.faults`` hit the completion routes (route ``submit``). ``usage=False``
emulates a server that never sends usage. Run ``python -m gpubench_openai.emulator --port 0``
to serve one by hand. Needs the testing extra (``pip install 'gpubench-sdk[testing]'``).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import struct
import time
import wave
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from gpubench_sdk import testing as kit

DEFAULT_MODEL = "emulated-llm"
_ECHO_KEYS = ("sleep_ms", "chunks", "echo", "fail")
MAX_EMBEDDING_INPUTS = 2048  # OpenAI's limit for input as an array
MAX_AUDIO_BYTES = 25 * 1024 * 1024  # OpenAI's upload limit for transcriptions (25 MB)
_COMPRESSED_BYTES_PER_S = 16_000  # 128 kbit/s: the duration guessed for a non-WAV upload
# OpenAI's error ``type`` and ``code`` per status: a 429 says what ran out in ``type``
# ("requests", "tokens") and always has the code "rate_limit_exceeded"; its 5xx are type
# "server_error" (API reference, "Error codes")
_KINDS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


@dataclass(frozen=True, slots=True)
class ModelSpeed:
    """How fast the emulated model is: prefill per prompt token and decode rate."""

    prefill_ms_per_token: float = 0.2
    tokens_per_s: float = 200.0
    default_max_tokens: int = 16


def error_body(status: int, message: str, kind: str, code: str | None = None) -> bytes:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return json.dumps(
        {"error": {"message": message, "type": kind, "param": None, "code": code}}
    ).encode()


def _render_error(status: int, message: str) -> tuple[bytes, str]:
    kind, code = _KINDS.get(status, ("server_error", None))
    return error_body(status, message, kind, code), "application/json"


def make_app(
    fleet: kit.SimulatedFleet,
    *,
    api_key: str | None = None,
    model: str = DEFAULT_MODEL,
    speed: ModelSpeed | None = None,
    usage: bool = True,
    prefix_cache: kit.PrefixCache | None = None,
    embedding_dim: int = 16,
    audio_rtf: float = 0.05,
    speech_words_per_s: float = 2.5,
) -> kit.ASGIApp:
    """The emulator app for ``fleet``; with ``api_key`` every request must carry it
    (``Authorization: Bearer <key>``); with ``prefix_cache``, prompts' shared prefixes are
    prefilled once."""
    pace = speed or ModelSpeed()
    created_s = int(time.time())  # the model's "created" in /v1/models
    itl_s = 1.0 / pace.tokens_per_s
    key = kit.KeyCheck(api_key, bare=True, message="Incorrect API key provided")
    emu = kit.Emulator(fleet, name="OpenAI", check=key, error_body=_render_error)

    def job_input(body: dict[str, Any], chat: bool) -> tuple[dict[str, Any], int, dict[str, Any]]:
        """The fleet job for a request, how many leading chunks are prefill, and its usage's
        prompt counts."""
        if "sleep_ms" in body:  # the testing kit's echo probe
            return {k: body[k] for k in _ECHO_KEYS if k in body}, 0, {"prompt_tokens": 0}
        if chat:
            said = [_message_content(m) for m in body.get("messages") or []]
            text, pictures = " ".join(t for t, _ in said), sum(n for _, n in said)
        else:
            text, pictures = str(body.get("prompt", "")), 0
        tokens = text.split()
        prompt: dict[str, Any] = {"prompt_tokens": len(tokens) + pictures}
        cached = 0
        if prefix_cache is not None:
            if fleet.counts().workers == 0:  # scaled to zero: the next replica starts empty
                prefix_cache.clear()
            cached = prefix_cache.reuse(tokens)
            prompt["prompt_tokens_details"] = {"cached_tokens": cached}
        n = body.get("max_tokens") or body.get("max_completion_tokens") or pace.default_max_tokens
        computed = len(tokens) + pictures - cached
        prefill = math.ceil(computed * pace.prefill_ms_per_token / 1e3 / itl_s)
        total = prefill + int(n)
        return {"sleep_ms": total * itl_s * 1e3, "chunks": total}, prefill, prompt

    def token_text(job: kit.Job, index: int) -> str:
        echo = job.input.get("echo")
        return f"{echo} " if echo is not None else f"tok{index} "

    @emu.route("/v1/chat/completions", "POST", fault="submit")
    @emu.route("/v1/completions", "POST", fault="submit")
    async def completions(request: kit.Request) -> Any:
        chat = request.url.path.endswith("/chat/completions")
        body = await emu.read_json(request)
        if body.get("model") != model:
            raise kit.Reject(404, f"The model `{body.get('model')}` does not exist.")
        if chat and not isinstance(body.get("messages"), list):
            raise kit.Reject(400, "messages: field required")
        stream = bool(body.get("stream"))
        payload, prefill, prompt = job_input(body, chat)
        if stream and "sleep_ms" in body and not payload.get("chunks"):
            payload["chunks"] = 1
        job = emu.submit(payload, full="server busy: {exc}")
        kind = "chat.completion" if chat else "text_completion"
        headers = {"x-request-id": job.id}
        if stream:
            opts = body.get("stream_options")
            want_usage = usage and isinstance(opts, dict) and bool(opts.get("include_usage"))
            events = _events(job, chat, prefill, prompt, want_usage, kind)
            # a client that disconnects aborts its request, as vLLM does
            return emu.sse(
                events, end="[DONE]", headers=headers, on_close=lambda: fleet.cancel(job.id)
            )
        await emu.finished(request, job, "the model failed: {error}")
        n = max(len(job.stream) - prefill, 0)
        text = "".join(token_text(job, i) for i in range(n)) if n else token_text(job, 0)
        said = {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
        choice = {"index": 0, "finish_reason": "length", **said}
        answer: dict[str, Any] = {"id": job.id, "object": kind, "created": int(time.time()),
                                  "model": model, "choices": [choice]}  # fmt: skip
        if usage:
            answer["usage"] = _usage(prompt, max(n, 1))
        return emu.json(answer, headers=headers)

    async def _events(
        job: kit.Job, chat: bool, prefill: int, prompt: dict[str, Any], want_usage: bool, kind: str
    ) -> AsyncIterator[Any]:
        # every chunk of one answer carries the same id and "created" (OpenAI, vLLM)
        base = {"id": job.id, "object": f"{kind}.chunk" if chat else kind,
                "created": int(time.time()), "model": model}  # fmt: skip

        def token(text: str) -> dict[str, Any]:
            delta = {"delta": {"content": text}} if chat else {"text": text}
            return {**base, "choices": [{"index": 0, **delta, "finish_reason": None}]}

        if chat:  # vLLM's first chunk: the role, no content
            yield {**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}
        sent = 0
        # the fleet appends tokens on its own schedule; look again within 0.5 ms
        async for _ in kit.follow(job, 0.0005):
            if sent >= prefill:
                yield token(token_text(job, sent - prefill))
            sent += 1
        if job.status is not kit.JobStatus.COMPLETED:
            error = {"message": f"the model failed: {job.error}", "type": "server_error"}
            yield {"error": {**error, "code": 500}}
        else:
            if not len(job.stream) > prefill:  # a job without chunks answers at its end
                yield token(token_text(job, 0))
            n = max(len(job.stream) - prefill, 1)
            end: dict[str, Any] = {"delta": {}} if chat else {"text": ""}
            yield {**base, "choices": [{"index": 0, **end, "finish_reason": "length"}]}
            if want_usage:
                yield {**base, "choices": [], "usage": _usage(prompt, n)}

    @emu.route("/v1/embeddings", "POST", fault="submit")
    async def embeddings(request: kit.Request) -> Any:
        body = await emu.read_json(request)
        if body.get("model") != model:
            raise kit.Reject(404, f"The model `{body.get('model')}` does not exist.")
        inputs = _embedding_inputs(body.get("input"))
        dims = body.get("dimensions", embedding_dim)
        if not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= embedding_dim:
            raise kit.Reject(400, f"dimensions: must be an integer from 1 to {embedding_dim}")
        encoding = body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            raise kit.Reject(400, "encoding_format: must be 'float' or 'base64'")
        tokens = sum(len(text.split()) for text in inputs)
        # one forward pass over every input's tokens: the batch is prefill, no decode
        job = emu.submit({"sleep_ms": tokens * pace.prefill_ms_per_token, "chunks": 1},
                         full="server busy: {exc}")  # fmt: skip
        await emu.finished(request, job, "the model failed: {error}")
        data = [
            {"object": "embedding", "index": i, "embedding": _vector(text, dims, encoding)}
            for i, text in enumerate(inputs)
        ]
        answer: dict[str, Any] = {"object": "list", "data": data, "model": model}
        if usage:
            answer["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
        return emu.json(answer, headers={"x-request-id": job.id})

    @emu.route("/v1/audio/transcriptions", "POST", fault="submit")
    async def transcriptions(request: kit.Request) -> Any:
        form = await request.form(max_part_size=MAX_AUDIO_BYTES)
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise kit.Reject(400, "file: required (multipart/form-data, the audio file)")
        if form.get("model") != model:
            raise kit.Reject(404, f"The model `{form.get('model')}` does not exist.")
        audio = await upload.read()
        seconds = _audio_seconds(audio)
        if seconds <= 0:
            raise kit.Reject(400, "file: the audio file is empty or unreadable")
        fmt = form.get("response_format", "json")
        if fmt not in ("json", "text", "verbose_json"):
            raise kit.Reject(400, f"response_format: {fmt!r} is not json, text or verbose_json")
        job = emu.submit({"sleep_ms": seconds * audio_rtf * 1e3, "chunks": 1},
                         full="server busy: {exc}")  # fmt: skip
        await emu.finished(request, job, "the model failed: {error}")
        words = max(1, round(seconds * speech_words_per_s))
        text = " ".join(f"word{i}" for i in range(words))
        headers = {"x-request-id": job.id}
        if fmt == "text":
            return emu.text(text + "\n", headers=headers)
        answer: dict[str, Any] = {"text": text}
        if fmt == "verbose_json":
            language = str(form.get("language") or "english")
            answer.update(task="transcribe", language=language, duration=seconds, segments=[])
        elif usage:
            answer["usage"] = {"type": "duration", "seconds": round(seconds, 3)}
        return emu.json(answer, headers=headers)

    # the Model object's required fields: id, object, created, owned_by (vLLM owns "vllm")
    entry = {"id": model, "object": "model", "created": created_s, "owned_by": "gpubench"}
    emu.static("/v1/models", {"object": "list", "data": [entry]})

    @emu.route("/health", check=False)
    async def health(request: kit.Request) -> Any:
        return emu.reply(status=200)

    return emu.app()


def _embedding_inputs(value: Any) -> list[str]:
    """An embeddings body's ``input`` as one text per vector (token ids as their numbers'
    text, one word each); ``Reject`` 400 for what OpenAI refuses."""
    if isinstance(value, str) or (
        isinstance(value, list) and value and all(isinstance(t, int) for t in value)
    ):
        value = [value]
    if not isinstance(value, list) or not value:
        raise kit.Reject(400, "input: must be a string or a non-empty array")
    if len(value) > MAX_EMBEDDING_INPUTS:
        raise kit.Reject(400, f"input: at most {MAX_EMBEDDING_INPUTS} items, got {len(value)}")
    texts = []
    for i, item in enumerate(value):
        if isinstance(item, list) and item and all(isinstance(t, int) for t in item):
            item = " ".join(map(str, item))
        if not isinstance(item, str) or not item.strip():
            raise kit.Reject(400, f"input[{i}]: must be a non-empty string or token array")
        texts.append(item)
    return texts


def _message_content(message: Any) -> tuple[str, int]:
    """A chat message's text, and the tokens its pictures cost (``image_tokens``); a part
    that is neither text nor a readable picture is a ``Reject`` 400, as OpenAI refuses it."""
    content = message.get("content", "") if isinstance(message, dict) else ""
    if isinstance(content, str):
        return content, 0
    if not isinstance(content, list):
        raise kit.Reject(400, "messages[].content: must be a string or an array of parts")
    texts, pictures = [], 0
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image_url" and isinstance(part.get("image_url"), dict):
            image = part["image_url"]
            size = _picture_size(str(image.get("url", "")), i)
            pictures += image_tokens(size, image.get("detail"))
        else:
            raise kit.Reject(400, f"content[{i}]: a text or image_url part")
    return " ".join(texts), pictures


def _picture_size(url: str, index: int) -> tuple[int, int]:
    """A base64 ``data:`` URL's PNG size (the emulator fetches no http URL)."""
    head, _, data = url.partition(",")
    if not head.startswith("data:image/") or not head.endswith(";base64"):
        raise kit.Reject(400, f"content[{index}].image_url.url: a base64 data:image/... URL")
    raw = base64.b64decode(data[:64])  # the signature and IHDR are in the first 33 bytes
    if raw[:8] != b"\x89PNG\r\n\x1a\n" or raw[12:16] != b"IHDR":
        raise kit.Reject(400, f"content[{index}]: the emulator reads PNG pictures only")
    width, height = struct.unpack(">II", raw[16:24])
    return width, height


def image_tokens(size: tuple[int, int], detail: Any = None) -> int:
    """A picture's tokens as OpenAI's GPT-4o-class models count them (vision guide,
    "Calculating costs"): 85 at ``low``; else 85 + 170 per 512-pixel tile once the picture
    fits in 2048x2048 and its shorter side in 768 (scaled down only)."""
    if detail == "low":
        return 85
    fit = min(1.0, 2048 / max(size))
    wide, high = size[0] * fit, size[1] * fit
    shrink = min(1.0, 768 / min(wide, high))
    tiles = math.ceil(int(wide * shrink) / 512) * math.ceil(int(high * shrink) / 512)
    return 85 + 170 * tiles


def _audio_seconds(audio: bytes) -> float:
    """A WAV's duration from its header; another format's guessed from its size."""
    try:
        with wave.open(io.BytesIO(audio), "rb") as clip:
            return clip.getnframes() / clip.getframerate()
    except (wave.Error, EOFError, ZeroDivisionError):
        return len(audio) / _COMPRESSED_BYTES_PER_S


def _vector(text: str, dims: int, encoding: str) -> list[float] | str:
    """A unit vector drawn from ``text`` alone, as floats or base64 float32."""
    seed = hashlib.sha256(text.encode()).digest()
    raw = [b - 127.5 for b in (seed * (dims // len(seed) + 1))[:dims]]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    vector = [x / norm for x in raw]
    if encoding == "base64":
        return base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
    return vector


def _usage(prompt: dict[str, Any], completion_tokens: int) -> dict[str, Any]:
    total = prompt["prompt_tokens"] + completion_tokens
    return {**prompt, "completion_tokens": completion_tokens, "total_tokens": total}


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_openai.emulator``."""
    parser = kit.EmulatorParser(__doc__, port=8000, max_workers=2)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--tokens-per-s", type=float, default=200.0)
    parser.add_argument("--prefill-ms-per-token", type=float, default=0.2)
    parser.add_argument("--no-usage", action="store_true", help="never send usage")
    parser.add_argument("--prefix-cache", action="store_true", help="cache shared prefixes")
    parser.add_argument("--block-tokens", type=int, default=16, help="prefix cache block")
    parser.add_argument("--embedding-dim", type=int, default=16, help="/v1/embeddings length")
    parser.add_argument("--audio-rtf", type=float, default=0.05, help="seconds per audio second")
    args = parser.parse(argv)
    speed = ModelSpeed(args.prefill_ms_per_token, args.tokens_per_s)
    cache = kit.PrefixCache(args.block_tokens) if args.prefix_cache else None
    app = make_app(args.fleet(), api_key=args.api_key, model=args.model, speed=speed,
                   usage=not args.no_usage, prefix_cache=cache,
                   embedding_dim=args.embedding_dim, audio_rtf=args.audio_rtf)  # fmt: skip
    args.serve(app, path="/v1")


if __name__ == "__main__":
    main()
