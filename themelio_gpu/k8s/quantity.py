"""A quantity written the way the API server stores it, so what a stack applies is what it reads back.

The API server canonicalizes every quantity it stores (k8s.io/apimachinery/pkg/api/resource/quantity.go,
`Quantity.CanonicalizeBytes`): a whole number in decimal SI keeps the largest exponent that is a multiple of
3 and leaves an integer mantissa, so `1000` is stored as `1k` and `1500` stays `1500`. A manifest that says
`1000` reads back as `1k`, and Terraform's kubernetes_manifest then fails with "Provider produced
inconsistent result after apply" (hashicorp/terraform-provider-kubernetes#2508).
"""

from __future__ import annotations

_SUFFIXES = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def canonical_quantity(value: int) -> str:
    """The API server's canonical text of a whole, non-negative decimal quantity."""
    if value < 0:
        raise ValueError(f"a count is not negative: {value}")
    exponent = 0
    while value and value % 1000 == 0 and exponent < 18:
        value //= 1000
        exponent += 3
    return f"{value}{_SUFFIXES[exponent]}"
