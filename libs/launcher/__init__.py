"""The local launcher: every service of the stack as a process on localhost, what ``make run`` starts.

:data:`SERVICES` lists the services in start order (those whose module exists are started);
:class:`Stack` starts them, waits for SERVING, interleaves their logs and stops them, and is what
full-stack tests use; :func:`main` is the command line, ``python -m libs.launcher``.
"""

from libs.launcher.cli import main
from libs.launcher.registry import (
    SERVICES,
    ServiceSpec,
    available_services,
    module_exists,
    parse_shards,
    scale_out,
    service_spec,
)
from libs.launcher.stack import (
    TEST_PORT_OFFSETS,
    Endpoint,
    PortInUse,
    ServiceExit,
    Stack,
    StartError,
    check_health,
    describe_returncode,
    exit_reason,
    failure_reason,
    find_free_port_offset,
    port_is_free,
    shifted_ports,
    start_on_free_ports,
    worker_port_offsets,
)

__all__ = [
    "SERVICES",
    "TEST_PORT_OFFSETS",
    "Endpoint",
    "PortInUse",
    "ServiceExit",
    "ServiceSpec",
    "Stack",
    "StartError",
    "available_services",
    "check_health",
    "describe_returncode",
    "exit_reason",
    "failure_reason",
    "find_free_port_offset",
    "main",
    "module_exists",
    "parse_shards",
    "port_is_free",
    "scale_out",
    "service_spec",
    "shifted_ports",
    "start_on_free_ports",
    "worker_port_offsets",
]
