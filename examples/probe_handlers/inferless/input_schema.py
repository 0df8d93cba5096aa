# Inferless input schema (https://docs.inferless.com): one optional scalar input per option.
INPUT_SCHEMA = {
    "quick": {"datatype": "BOOL", "required": False, "shape": [1], "example": [True]},
    "backend": {"datatype": "STRING", "required": False, "shape": [1], "example": ["auto"]},
    "phases": {
        "datatype": "STRING",
        "required": False,
        "shape": [1],
        "example": ["matmul,memory,transfer,launch,first_op"],
    },
}
