"""A Modal web endpoint emulator on the testing kit's simulated fleet.

- ``POST`` any path: the JSON body becomes a fleet job (a function call). Answered ``200`` with
  the output when it finishes within ``redirect_after_s`` (Modal: 150 s), else ``303 See
  Other`` to the result URL, ``<same path>?__modal_function_call_id=<id>``
  (https://modal.com/docs/guide/webhook-timeouts). Every answer carries the call id in
  ``Modal-Function-Call-Id``.
- ``GET`` the result URL: waits up to ``redirect_after_s`` again, then the result or another
  ``303``. ``POST`` to it is refused (``400 modal-http: bad redirect method``).
- With ``api_key`` (``<token id>:<token secret>``) every request needs ``Modal-Key`` and
  ``Modal-Secret``: else ``401 modal-http: missing credentials for proxy authorization``
  (https://modal.com/docs/guide/webhook-proxy-auth).
- A client that hangs up before the redirect cancels its call (an ASGI app sees the
  disconnect); one that hangs up on a result URL does not (the call runs on).
- Asked for ``text/event-stream``, a job that streams (``"chunks": n``) is answered as
  server-sent events, one ``data:`` event per piece, from the moment it runs
  (https://modal.com/docs/guide/streaming-endpoints).

Faults in ``fleet.faults`` hit ``POST`` (route ``submit``) and result URLs (``poll``). Run
``python -m gpubench_modal.emulator --port 0`` to serve one by hand.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from gpubench_sdk import testing as kit

from ._provider import CALL_ID_HEADER, CALL_ID_PARAM, LONG_REQUEST_S


def modal_http(status: int, message: str) -> tuple[bytes, str]:
    """The proxy's own errors: ``modal-http: <message>`` in plain text."""
    return f"modal-http: {message}".encode(), "text/plain; charset=utf-8"


def _fault_route(scope: Any) -> str:
    return "poll" if CALL_ID_PARAM.encode() in scope.get("query_string", b"") else "submit"


async def _yielded(job: kit.Job) -> AsyncIterator[Any]:
    """What the function yields, as it yields it."""
    async for piece in kit.follow(job, 0.002):
        yield piece
    if job.status is not kit.JobStatus.COMPLETED:
        # a function that raises mid-stream: the response was already started, so the server
        # can only cut the connection (the chunked body never ends)
        raise RuntimeError(f"function call {job.id} failed mid-stream: {job.error}")


def make_app(
    fleet: kit.SimulatedFleet,
    *,
    api_key: str | None = None,
    redirect_after_s: float = LONG_REQUEST_S,
) -> kit.ASGIApp:
    """The emulator app for ``fleet``; ``redirect_after_s`` scales Modal's 150 s down."""
    key = kit.KeyCheck(api_key, header=("modal-key", "modal-secret"),
                       message="invalid credentials for proxy authorization",
                       missing="missing credentials for proxy authorization")  # fmt: skip
    emu = kit.Emulator(fleet, name="Modal", check=key, error_body=modal_http,
                       fault_body=kit.json_error, fault=_fault_route)  # fmt: skip

    async def answer(request: kit.Request, job: kit.Job, *, cancel_on_hangup: bool) -> Any:
        # the app streams (SSE) what the function yields, when asked for a stream
        streamed = "text/event-stream" in request.headers.get("accept", "") and bool(
            job.input.get("chunks")
        )
        seen = await kit.watch(request, job, timeout_s=redirect_after_s, started=streamed)
        headers = {CALL_ID_HEADER: job.id}
        if streamed and seen == "done":
            return emu.sse(_yielded(job), headers=headers)  # its pieces go out as they come
        if not job.done.is_set():
            if seen == "hung_up":
                if cancel_on_hangup:
                    fleet.cancel(job.id)
                return emu.reply(status=499, headers=headers)
            result_url = request.url.replace(query=f"{CALL_ID_PARAM}={job.id}")
            return emu.reply(status=303, headers={**headers, "Location": str(result_url)})
        if job.status is not kit.JobStatus.COMPLETED:
            return emu.text("Internal Server Error", 500, headers=headers)
        return emu.json(job.result, headers=headers)

    @emu.route("/{path:path}", "GET", "POST")
    async def endpoint(request: kit.Request) -> Any:
        call_id = request.query_params.get(CALL_ID_PARAM)
        if call_id is not None:
            if request.method != "GET":
                raise kit.Reject(400, "bad redirect method")
            job = emu.job(call_id, "function call not found")
            return await answer(request, job, cancel_on_hangup=False)
        if request.method != "POST":
            return emu.json({"detail": "Method Not Allowed"}, 405)
        try:  # what a FastAPI endpoint answers for a body it cannot parse
            payload = await emu.read_json(request, not_object=None)
        except kit.Reject:
            return emu.json({"detail": "body is not valid JSON"}, 422)
        payload = payload if isinstance(payload, dict) else {"input": payload}
        job = emu.submit(payload, full="too many requests")
        return await answer(request, job, cancel_on_hangup=True)

    return emu.app()


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_modal.emulator``."""
    parser = kit.EmulatorParser(
        __doc__, port=8690, key_help="require this '<id>:<secret>' (env variable)"
    )
    parser.add_argument("--redirect-after-s", type=float, default=LONG_REQUEST_S)
    parser.serve(make_app, argv)


if __name__ == "__main__":
    main()
