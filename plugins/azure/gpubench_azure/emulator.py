"""An Azure Container Apps emulator on the testing kit's simulated fleet: the Resource Manager
routes ``azure-mgmt-appcontainers`` calls, and the app's ingress, in one ASGI app.

- Resource Manager (``api-version`` required, ``Authorization: Bearer`` checked when
  ``arm_token`` is given), under ``/subscriptions/S/resourceGroups/G/providers/Microsoft.App``:
  ``GET``/``PATCH containerApps/A`` (the PATCH is a JSON merge patch answered ``202`` with a
  ``Location`` to poll, ``202`` until the operation is done, then ``200`` with the app),
  ``GET containerApps/A/revisions`` and ``GET containerApps/A/revisions/R/replicas``. A change
  of ``properties.template`` rolls a new revision (Single revision mode: only it is active).
  Errors have ARM's shape, ``{"error": {"code", "message"}}``.
- The ingress: any other path. ``POST`` a JSON payload; the answer is the fleet's output with
  the job id in ``x-request-id``. A client that hangs up cancels the job.

``minReplicas``/``maxReplicas``/``cooldownPeriod`` drive the fleet's min/max workers and idle
timeout. Workers booting (or waiting for GPU capacity) are listed as ``NotRunning`` replicas,
the others as ``Running``. Faults apply to the ingress (route ``submit``) and Resource Manager
(``control``). The Azure SDK sends bearer tokens only over HTTPS: serve it with TLS
(the kit's ``throwaway_tls`` writes a throwaway CA and certificate; ``python -m
gpubench_azure.emulator --tls-dir DIR`` does it and prints the ``https://`` URL).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import uuid
from typing import Any

from gpubench_sdk import ScalingSettings
from gpubench_sdk import testing as kit

SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
DEFAULT_APP = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/gpubench"
    "/providers/Microsoft.App/containerApps/llama"
)
_PREFIX = "/subscriptions/{sub}/resourceGroups/{group}/providers/Microsoft.App/containerApps"
_CODES = {
    400: "BadRequest",
    401: "InvalidAuthenticationToken",
    404: "ResourceNotFound",
    429: "TooManyRequests",
    500: "InternalServerError",
    503: "ServiceUnavailable",
}


def arm_error_body(status: int, message: str) -> tuple[bytes, str]:
    """ARM's error shape (azure-core reads ``error.code`` and ``error.message``)."""
    code = _CODES.get(status, "InternalServerError" if status >= 500 else "BadRequest")
    return json.dumps({"error": {"code": code, "message": message}}).encode(), "application/json"


def make_app(
    fleet: kit.SimulatedFleet,
    *,
    api_key: str | None = None,
    auth: str = "bearer",
    arm_token: str | None = None,
    app_id: str = DEFAULT_APP,
    location: str = "eastus",
    operation_delay_s: float = 0.0,
) -> kit.ASGIApp:
    """The emulator app for ``fleet``. The ingress requires ``api_key`` (``auth``: ``bearer``
    or ``functions-key``) when given; Resource Manager requires ``arm_token`` when given."""
    arm_key = kit.KeyCheck(arm_token, message="The access token is missing or invalid.")
    functions_key = auth == "functions-key"
    denied = "You do not have permission to view this directory or page."
    ingress_key = kit.KeyCheck(api_key, "x-functions-key" if functions_key else "authorization",
                               () if functions_key else ("Bearer",), message=denied)  # fmt: skip
    app_name = app_id.rsplit("/", 1)[-1]

    def check_arm(request: kit.Request) -> None:
        if "api-version" not in request.query_params:
            raise kit.Reject(400, "The api-version query parameter is required.")
        arm_key(request)
        name = request.path_params.get("app")
        if name is not None and name.lower() != app_name.lower():
            raise kit.Reject(
                404, f"The Resource 'Microsoft.App/containerApps/{name}' was not found."
            )

    emu = kit.Emulator(
        fleet, name="Azure Container Apps", check=check_arm, error_body=arm_error_body
    )
    container = {"name": "model", "image": "mcr.microsoft.com/k8se/gpu-quickstart:latest",
                 "resources": {"cpu": 8.0, "memory": "56Gi"}}  # fmt: skip
    state: dict[str, Any] = {
        "template": {"containers": [container], "scale": {"pollingInterval": 30, "rules": []}},
        "revisions": [],
    }
    operations = kit.Operations(operation_delay_s, missing="The operation was not found.")

    def now() -> str:
        return dt.datetime.now(dt.UTC).isoformat()

    def roll_revision() -> None:
        number = len(state["revisions"]) + 1
        state["revisions"].append(
            {"name": f"{app_name}--{number:02d}{uuid.uuid4().hex[:5]}", "createdTime": now()}
        )

    def scale_of_fleet() -> dict[str, Any]:
        s = fleet.scaling
        assert s.idle_timeout_s is not None
        return {**state["template"]["scale"], "minReplicas": s.min_workers,
                "maxReplicas": s.max_workers, "cooldownPeriod": int(s.idle_timeout_s)}  # fmt: skip

    roll_revision()

    def app_body(request: kit.Request) -> dict[str, Any]:
        latest = state["revisions"][-1]["name"]
        template = copy.deepcopy(state["template"])
        template["scale"] = scale_of_fleet()
        host = request.url.netloc
        return {
            "id": app_id,
            "name": app_name,
            "type": "Microsoft.App/containerApps",
            "location": location,
            "properties": {
                "provisioningState": "Succeeded",
                "runningStatus": "Running",
                "workloadProfileName": "NC8as-T4",
                "latestRevisionName": latest,
                "latestReadyRevisionName": latest,
                "latestRevisionFqdn": host,
                "configuration": {
                    "activeRevisionsMode": "Single",
                    "ingress": {"fqdn": host, "external": True, "targetPort": 8080},
                },
                "template": template,
            },
        }

    app_route = _PREFIX + "/{app}"

    @emu.route(app_route, "GET", "PATCH")
    async def container_app(request: kit.Request) -> Any:
        if request.method == "GET":
            return app_body(request)
        patch = await emu.read_json(request, invalid="The request content is not valid JSON.",
                                    not_object=None)  # fmt: skip
        properties = patch.get("properties") if isinstance(patch, dict) else None
        template = properties.get("template") if isinstance(properties, dict) else None
        if template is not None:
            new = kit.merge_patch(
                {**copy.deepcopy(state["template"]), "scale": scale_of_fleet()}, template
            )
            scale = new.get("scale") or {}
            low, high = scale.get("minReplicas", 0), scale.get("maxReplicas", 10)
            if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high):
                raise kit.Reject(400, "minReplicas must be between 0 and maxReplicas.")
            if new != {**state["template"], "scale": scale_of_fleet()}:
                fleet.set_scaling(ScalingSettings(scale.get("minReplicas"),
                                                  scale.get("maxReplicas"),
                                                  scale.get("cooldownPeriod")))  # fmt: skip
                state["template"] = new
                roll_revision()
        operation = operations.start()
        where = (
            f"{request.base_url}subscriptions/{request.path_params['sub']}/providers/"
            f"Microsoft.App/locations/{location}/containerappOperationResults/{operation}"
            f"?api-version={request.query_params['api-version']}"
        )
        return emu.reply(status=202, headers={"Location": where})

    @emu.route("/subscriptions/{sub}/providers/Microsoft.App/locations/{location}"
               "/containerappOperationResults/{operation}")  # fmt: skip
    async def operation_result(request: kit.Request) -> Any:
        done, _ = operations.status(request.path_params["operation"])
        if not done:
            return emu.reply(status=202, headers={"Location": str(request.url)})
        return app_body(request)

    def revision_body(index: int, revision: dict[str, Any]) -> dict[str, Any]:
        active = index == len(state["revisions"]) - 1
        properties = {
            "createdTime": revision["createdTime"],
            "active": active,
            "replicas": fleet.counts().workers if active else 0,
            "trafficWeight": 100 if active else 0,
            "healthState": "Healthy",
            "provisioningState": "Provisioned",
            "runningState": "Running" if active else "Stopped",
        }
        return {"id": f"{app_id}/revisions/{revision['name']}", "name": revision["name"],
                "type": "Microsoft.App/containerApps/revisions",
                "properties": properties}  # fmt: skip

    @emu.route(app_route + "/revisions")
    async def revisions(request: kit.Request) -> Any:
        return {"value": [revision_body(i, r) for i, r in enumerate(state["revisions"])]}

    @emu.route(app_route + "/revisions/{revision}/replicas")
    async def replicas(request: kit.Request) -> Any:
        name = request.path_params["revision"]
        if name not in [r["name"] for r in state["revisions"]]:
            raise kit.Reject(404, f"The revision '{name}' was not found.")
        if name != state["revisions"][-1]["name"]:
            return {"value": []}  # inactive: no replicas
        counts = fleet.counts()
        listed = [
            replica_body(name, i, running=i < counts.ready)
            for i in range(counts.ready + counts.initializing + counts.throttled)
        ]
        return {"value": listed}

    def replica_body(revision: str, index: int, *, running: bool) -> dict[str, Any]:
        replica = f"{revision}-{index:04d}"
        running_state = "Running" if running else "NotRunning"
        container = {"name": "model", "ready": running, "started": running, "restartCount": 0,
                     "runningState": "Running" if running else "Waiting"}  # fmt: skip
        return {
            "id": f"{app_id}/revisions/{revision}/replicas/{replica}",
            "name": replica,
            "type": "Microsoft.App/containerApps/revisions/replicas",
            "properties": {
                "createdTime": now(),
                "runningState": running_state,
                "containers": [container],
            },
        }

    # the ingress: Easy Auth answers 401 without a valid token; a hang-up ends the replica's
    # request
    emu.calls(check=ingress_key)

    return emu.app()


def main(argv: list[str] | None = None) -> None:
    """Serve an emulator until interrupted: ``python -m gpubench_azure.emulator``."""
    parser = kit.EmulatorParser(
        __doc__, port=8689, key_help="require this ingress key (env variable)"
    )
    parser.add_argument("--tls-dir", help="write a throwaway CA (ca.pem) here and serve HTTPS")
    parser.add_argument("--app-id", default=DEFAULT_APP)
    parser.add_argument("--location", default="eastus")
    parser.add_argument("--auth", choices=["bearer", "functions-key"], default="bearer")
    parser.add_env_argument(
        "--arm-token-env", dest="arm_token", help="require this ARM bearer token (env variable)"
    )
    args = parser.parse(argv)
    app = make_app(args.fleet(), api_key=args.api_key, **args.own(exclude=("tls_dir",)))
    args.serve(app, tls=kit.throwaway_tls(args.tls_dir)[1:] if args.tls_dir else None)


if __name__ == "__main__":
    main()
