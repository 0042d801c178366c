"""Hidden states handed between pipeline stages (a dict of tensors)."""


class IntermediateTensors(dict):
    def __init__(self, tensors=None):
        super().__init__(tensors or {})
        self.tensors = self
