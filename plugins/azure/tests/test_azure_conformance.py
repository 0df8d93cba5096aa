"""The testing kit's conformance suite against the Azure Container Apps emulator over HTTPS on
loopback: Resource Manager through azure-mgmt-appcontainers, the ingress through httpx, both
trusting the emulator's throwaway CA (``ca_file``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from gpubench_azure import AzureProvider
from gpubench_azure.emulator import DEFAULT_APP, make_app

from gpubench_sdk.testing import (
    ASGIApp,
    ProviderConformance,
    ServedApp,
    SimulatedFleet,
    serve,
    throwaway_tls,
)

ARM_TOKEN_ENV = "GPUBENCH_TEST_AZURE_ARM_TOKEN"
ARM_TOKEN = "arm-token-conformance-51c7"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, str]:
    return throwaway_tls(tmp_path_factory.mktemp("tls"))


class TestAzureConformance(ProviderConformance):
    provider_class = AzureProvider

    @pytest.fixture(autouse=True)
    def _arm_token(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(ARM_TOKEN_ENV, ARM_TOKEN)

    @pytest.fixture
    def served(self, fleet: SimulatedFleet, tls: tuple[str, str, str]) -> Iterator[ServedApp]:
        self.ca_file = tls[0]
        with serve(self.make_emulator(fleet), tls=tls[1:]) as served:
            yield served

    def make_emulator(self, fleet: SimulatedFleet) -> ASGIApp:
        return make_app(fleet, api_key=self.api_key, arm_token=ARM_TOKEN)

    def options(self, url: str) -> dict[str, Any]:
        return {
            "app": DEFAULT_APP,
            "arm_endpoint": url,
            "arm_token_env": ARM_TOKEN_ENV,
            "ca_file": self.ca_file,  # the ingress URL is read from the app: https://FQDN
            "arm_poll_interval_s": 0.05,
            "replica_poll_s": 0.1,
            "region": "East US",  # ARM's spelling may differ from the plan's: still the same
            "cold_threshold_ms": 200,  # the suite's fleet boots in 0.4 s
        }
