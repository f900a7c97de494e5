"""The control plane: a kopf operator reconciling RLTrainingJobs into RayClusters."""
