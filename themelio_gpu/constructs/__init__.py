"""cdktf constructs, one per module. They turn a planned cluster (`fleet.ClusterPlan`) into resources."""
