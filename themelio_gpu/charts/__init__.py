"""The Helm charts a fleet pins (docs/charts.md): fetched once into a local cache (`charts fetch`, with helm from
NVIDIA's repositories or copied from a folder), rendered from there by `verify`, and read to tabulate the
values keys of a new chart version (`charts known-values`)."""
