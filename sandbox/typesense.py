"""An attempt's Typesense (policy search): its container, its URL and readiness
probe, and the collection the servers search. What goes into the collection is
the preparer's (`Preparer.index`); the servers learn where to look at boot.
"""

from __future__ import annotations

from sandbox.preparer import TypesenseEndpoint
from sandbox.services import HttpProbe, ServiceSpec, tmpfs_mount

TYPESENSE_PORT = 8108
TYPESENSE_UID = 10002  # the image runs Typesense as this uid (its tmpfs mounts are owned by it)
# The collection's name is fixed at boot (the servers are told it); it is created
# at prepare time only when the task has policy documents.
POLICY_COLLECTION = "policies"


def typesense_spec(image: str, api_key: str) -> ServiceSpec:
    return ServiceSpec(
        role="typesense",
        image=image,
        port=TYPESENSE_PORT,
        ready=HttpProbe("/health"),
        env={"TYPESENSE_API_KEY": api_key},
        tmpfs={"/data": tmpfs_mount("128m", TYPESENSE_UID), "/tmp": tmpfs_mount("16m", TYPESENSE_UID)},
    )


def typesense_endpoint(ip: str, api_key: str) -> TypesenseEndpoint:
    """Where the attempt's Typesense listens (bridge IP), and its collection."""
    return TypesenseEndpoint(
        url=f"http://{ip}:{TYPESENSE_PORT}", api_key=api_key, collection=POLICY_COLLECTION
    )
