"""gpubench provider plugin for Modal web endpoints.

Registered as ``modal`` on the ``gpubench.providers`` entry point. The emulator used by its
tests (a web endpoint with proxy auth and the 303 long-request redirect, on the simulated
fleet) lives in ``gpubench_modal.emulator`` (needs ``gpubench-modal[testing]``).
"""

from ._provider import ModalOptions, ModalProvider

__all__ = ["ModalOptions", "ModalProvider"]
