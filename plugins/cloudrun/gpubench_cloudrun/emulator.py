"""A Cloud Run emulator on the testing kit's simulated fleet: a fake Admin API v2 and the
service URL, in one ASGI app.

- Admin API (REST, as ``google.cloud.run_v2``'s REST transport speaks it):
  ``GET``/``PATCH /v2/projects/P/locations/L/services/S``, ``GET .../services/S/revisions``,
  ``GET /v2/projects/P/locations/L/operations/ID``. A PATCH replaces the service and answers a
  long-running operation (done at once, or after ``operation_delay_s``). Bodies are proto3
  JSON: camelCase, and zero values left out, so a missing ``minInstanceCount`` means 0.
  A template change rolls a new revision, and the new revision boots one instance, as Cloud
  Run starts a container to check that a revision becomes ready.
- The service URL: any other path. ``POST`` a JSON payload; the answer is the fleet's output
  with the job id in ``x-request-id``. A client that hangs up cancels the job.

``min_instance_count`` and ``max_instance_count`` drive the fleet's ``min_workers`` and
``max_workers``; the fleet's ``idle_timeout_s`` plays Cloud Run's idle reclaim. Faults in
``fleet.faults`` apply to the service URL (route ``submit``) and the Admin API (``control``).
Run ``python -m gpubench_cloudrun.emulator --port 0`` to serve one by hand.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable
from typing import Any

from gpubench_sdk import ScalingSettings
from gpubench_sdk import testing as kit

DEFAULT_SERVICE = "projects/p/locations/us-central1/services/gpubench-emulated"
SERVICE_TYPE = "type.googleapis.com/google.cloud.run.v2.Service"
# google.rpc.Code names of the statuses faults produce (google/rpc/code.proto's HTTP mapping)
_RPC_STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
               500: "INTERNAL", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}  # fmt: skip


def google_error_body(status: int, message: str) -> tuple[bytes, str]:
    """A Google API error (https://cloud.google.com/apis/design/errors): google-api-core reads
    ``error.message``, and fails on any other shape (``{"error": "text"}`` raised an
    AttributeError inside the official client instead of its 429/503 exception)."""
    code = _RPC_STATUS.get(status, "INTERNAL" if status >= 500 else "UNKNOWN")
    body = {"error": {"code": status, "message": message, "status": code}}
    return json.dumps(body).encode(), "application/json"


def fleet_scaling(fleet: kit.SimulatedFleet) -> dict[str, Any]:
    """``template.scaling`` as the fleet stands (a test may change the fleet directly)."""
    scaling: dict[str, Any] = {"maxInstanceCount": fleet.scaling.max_workers}
    if fleet.scaling.min_workers:  # proto3 JSON leaves zero out
        scaling["minInstanceCount"] = fleet.scaling.min_workers
    return scaling


def default_service(name: str, fleet: kit.SimulatedFleet) -> dict[str, Any]:
    """An L4 service as ``gcloud run deploy --gpu 1 --gpu-type nvidia-l4`` makes it."""
    return {
        "name": name,
        "generation": "1",
        "template": {
            "scaling": fleet_scaling(fleet),
            "nodeSelector": {"accelerator": "nvidia-l4"},
            "gpuZonalRedundancyDisabled": True,
            "containers": [
                {
                    "image": "us-docker.pkg.dev/cloudrun/container/hello",
                    "resources": {"limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}},
                }
            ],
        },
        "traffic": [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 100}],
    }


def make_app(
    fleet: kit.SimulatedFleet,
    *,
    api_key: str | None = None,
    authorize: Callable[[str], bool] | None = None,
    service_name: str = DEFAULT_SERVICE,
    operation_delay_s: float = 0.0,
) -> kit.ASGIApp:
    """The emulator app for ``fleet``. The service URL requires ``Authorization: Bearer``
    with ``api_key``, or a token ``authorize(token)`` accepts (an ID token check); with
    neither it is public. ``operation_delay_s`` keeps update operations running a while."""
    emu = kit.Emulator(fleet, name="Cloud Run", error_body=google_error_body, fault="submit")
    service_id = service_name.rsplit("/", 1)[-1]
    location = service_name.split("/services/", 1)[0]
    state: dict[str, Any] = {"service": default_service(service_name, fleet), "revisions": []}
    operations = kit.Operations(operation_delay_s)
    key = kit.KeyCheck(api_key)

    def roll_revision() -> None:
        number = len(state["revisions"]) + 1
        name = f"{service_name}/revisions/{service_id}-{number:05d}-{uuid.uuid4().hex[:3]}"
        template = state["service"]["template"]
        state["revisions"].append({"name": name, **copy.deepcopy(template)})
        state["service"]["latestReadyRevision"] = name
        state["service"]["latestCreatedRevision"] = name

    def apply_scaling(template: dict[str, Any]) -> None:
        scaling = template.get("scaling") or {}
        low, high = int(scaling.get("minInstanceCount", 0)), int(scaling.get("maxInstanceCount", 0))
        # a max of 0 is not set: Cloud Run's default applies
        fleet.set_scaling(ScalingSettings(min_workers=low, max_workers=high or None))

    roll_revision()
    emu.on_start.append(lambda: apply_scaling(state["service"]["template"]))

    def service_body(request: kit.Request) -> dict[str, Any]:
        state["service"]["template"]["scaling"] = fleet_scaling(fleet)
        body: dict[str, Any] = copy.deepcopy(state["service"])
        body["uri"] = str(request.base_url).rstrip("/")
        return body

    services = "/v2/projects/{project}/locations/{location}/services/{service}"

    @emu.route(services, "GET", "PATCH", fault="control")
    async def service(request: kit.Request) -> Any:
        name = f"{location}/services/{request.path_params['service']}"
        if name != service_name:
            raise kit.Reject(404, f"Resource '{name}' was not found")
        if request.method == "GET":
            return service_body(request)
        body = await emu.read_json(request, not_object=None)
        template = body.get("template") if isinstance(body, dict) else None
        if not isinstance(template, dict):
            raise kit.Reject(400, "service.template is required")
        scaling = template.get("scaling") or {}
        low, high = int(scaling.get("minInstanceCount", 0)), int(scaling.get("maxInstanceCount", 0))
        if low < 0 or (high and low > high):
            raise kit.Reject(400, "min_instance_count must be <= max_instance_count")
        state["service"]["template"]["scaling"] = fleet_scaling(fleet)
        if template != state["service"]["template"]:
            state["service"]["template"] = template
            state["service"]["generation"] = str(int(state["service"]["generation"]) + 1)
            apply_scaling(template)
            roll_revision()
            fleet.request_worker()  # the new revision's first instance (readiness check)
        op_name = f"{location}/operations/{uuid.uuid4()}"
        return operation_body(operations.start(service_body(request), name=op_name))

    def operation_body(name: str) -> dict[str, Any]:
        done, result = operations.status(name)
        body: dict[str, Any] = {"name": name, "metadata": {"@type": SERVICE_TYPE, **result}}
        if done:
            body["done"] = True
            body["response"] = {"@type": SERVICE_TYPE, **result}
        return body

    @emu.route("/v2/projects/{project}/locations/{location}/operations/{operation}",
               fault="control")  # fmt: skip
    async def operation(request: kit.Request) -> Any:
        return operation_body(f"{location}/operations/{request.path_params['operation']}")

    @emu.route(f"{services}/revisions", fault="control")
    async def revisions(request: kit.Request) -> Any:
        return {"revisions": list(reversed(state["revisions"]))}

    def authorized(request: kit.Request) -> None:
        if api_key is None and authorize is None:
            return
        token = key.given(request.headers)
        if api_key is not None and key.accepts(request.headers):
            return
        if not (authorize is not None and token and authorize(token)):
            # Google's front end answers 401 for a missing or invalid ID token
            raise kit.Reject(401, "Your client does not have permission (401)")

    # the service URL
    emu.calls(
        check=authorized, full="The request was aborted because there was no available instance."
    )

    return emu.app()


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_cloudrun.emulator``."""
    parser = kit.EmulatorParser(
        __doc__, port=8687, key_help="require this bearer token (env variable name)"
    )
    parser.add_argument(
        "--service", dest="service_name", metavar="SERVICE", default=DEFAULT_SERVICE
    )
    parser.serve(make_app, argv)


if __name__ == "__main__":
    main()
