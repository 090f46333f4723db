"""`pipeline`: configuration for the pipeline engines teams already run, written from the fleet.

- github_actions.py: a GitHub Actions workflow (synthesize, `changed`, one Terraform/OpenTofu job per
  changed stack: plan on pull requests, apply on the main branch);
- atlantis.py: Atlantis' repo-level `atlantis.yaml` (one project per stack folder, autoplanned when an
  input of that stack changes).

The engine runs the plans; this tool only says what to run. See docs/pipelines.md.
"""
