"""`sandbox`: a cluster's stack applied to a real control plane on this machine, with simulated GPU nodes.

tools.toml pins every tool; build.py builds them from their Go modules (`make sandbox-tools`); nodes.py makes
the nodes and ResourceSlices of a cluster's pools; cluster.py runs the control plane (kwokctl); deploy.py
applies the stack with Terraform, OpenTofu or the CDKTF CLI; workflow.py runs each `sandbox` subcommand
(its arguments: themelio_gpu/commands/sandbox.py).
"""
