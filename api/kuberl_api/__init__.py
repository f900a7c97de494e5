"""The RLTrainingJob API: one pydantic model tree shared by operator, runtime and CRD."""
