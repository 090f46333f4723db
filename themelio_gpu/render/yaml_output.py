"""YAML the tool writes for people to read: sorted keys, block style, no anchors."""

from __future__ import annotations

from typing import Any

import yaml

# libyaml's emitter when PyYAML has it (its wheels do): the same output, several times faster.
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _NoAliasDumper(_SafeDumper):  # type: ignore[valid-type,misc]
    # Repeated placements would otherwise print as &id001/*id001, which reviewers cannot read.
    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(data: Any) -> str:
    return yaml.dump(
        data, Dumper=_NoAliasDumper, sort_keys=True, default_flow_style=False, allow_unicode=True, width=1 << 30
    )
