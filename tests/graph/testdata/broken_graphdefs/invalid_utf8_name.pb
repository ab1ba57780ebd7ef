

badÿnameNoOp