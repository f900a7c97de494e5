from support.s3 import s3_bucket, s3_server  # noqa: F401 (fixtures)
from tests.runtime.sft.conftest import sft_data_dir, sft_model_dir  # noqa: F401 (fixtures)
