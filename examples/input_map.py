"""Map gpubench's image workload onto a real model's input schema (SDXL on Replicate/Cog).

Run: python examples/input_map.py [STORE]

gpubench's `image` workload sends `prompt, width, height, num_inference_steps, num_images,
seed`. SDXL's Cog predictor (replicate/cog-sdxl, predict.py) takes `prompt, width, height,
num_inference_steps, num_outputs, seed, scheduler, apply_watermark, ...` and, like every Cog
model, refuses inputs it does not declare. A stand-in with that schema is served here on
loopback, strict as the real one; the same run is made without and with an `InputMap`.
"""

from __future__ import annotations

import sys
from typing import Any, Literal

import anyio
from gpubench_http import HTTPProvider  # the generic plugin: its body template speaks Cog's
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import gpubench_sdk as gb
from gpubench_sdk.testing import serve


class SDXLInput(BaseModel):
    """A subset of cog-sdxl's predict() inputs, with its bounds; anything else is refused."""

    model_config = ConfigDict(extra="forbid")

    prompt: str
    width: int = 1024
    height: int = 1024
    num_outputs: int = Field(default=1, ge=1, le=4)
    num_inference_steps: int = Field(default=50, ge=1, le=500)
    scheduler: Literal["DDIM", "DPMSolverMultistep", "K_EULER", "K_EULER_ANCESTRAL"] = "K_EULER"
    seed: int | None = None
    apply_watermark: bool = True


async def predictions(request: Request) -> JSONResponse:
    body: dict[str, Any] = await request.json()
    try:
        given = SDXLInput.model_validate(body.get("input") or {})
    except ValidationError as exc:  # Cog answers 422 with pydantic's errors
        return JSONResponse({"detail": exc.errors(include_url=False)}, status_code=422)
    images = [f"data:image/png;base64,{i}" for i in range(given.num_outputs)]
    return JSONResponse({"status": "succeeded", "output": images})


def cog_target(url: str, mapping: gb.InputMap | None) -> HTTPProvider:
    return HTTPProvider(
        url=f"{url}/predictions", body={"input": "{payload}"}, output_path="$.output", input=mapping
    )


# What the workload sends -> what SDXL takes: one rename, two constants.
SDXL = gb.InputMap(
    rename={"num_images": "num_outputs"}, set={"scheduler": "K_EULER", "apply_watermark": False}
)


async def main(store: str) -> None:
    workload = gb.ImageGeneration(steps=4, num_images=2)
    app = Starlette(routes=[Route("/predictions", predictions, methods=["POST"])])
    with serve(app) as served:
        for label, mapping in (("as sent", None), ("mapped", SDXL)):
            result = await gb.run(
                {"sdxl": cog_target(served.url, mapping)},
                workload,
                [gb.Burst(total=6, concurrency=2)],
                store=store,
                name=f"sdxl-{label}",
            )
            with gb.Store(store) as s:
                rows = s.invocations(result.run_id)
            outcomes = sorted({str(i.outcome) for i in rows})
            images = sum(i.output_units or 0 for i in rows)
            print(f"{label}: {len(rows)} requests, outcomes {outcomes}, {images} images")
            if mapping is None:
                print(f"  e.g. {rows[0].error}")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "input-map.sqlite")
