"""eagle's exception types that do not need a compiled module."""


class CudaError(RuntimeError):
    """A CUDA driver call made by eagle failed (eagle reaches CUDA through the
    driver, libcuda.so.1, never the CUDA runtime).

    Attributes: ``status`` (the CUresult the driver returned, or a negative
    eagle shim code such as -1 for "no CUDA driver library found"), ``name``
    (e.g. ``"CUDA_ERROR_INVALID_VALUE"``), ``text`` (the driver's sentence for it),
    ``detail`` (what eagle was doing), and, when a graph failed to
    instantiate or a capture failed, ``node_index`` / ``node_name`` of the
    eagle node responsible (``None`` otherwise).
    """

    def __init__(self, status, name, text, detail=None, node_index=None, node_name=None):
        self.status = status
        self.name = name
        self.text = text
        self.detail = detail
        self.node_index = node_index
        self.node_name = node_name
        msg = f"{name}: {text}"
        if detail:
            msg = f"{detail}: {msg}"
        super().__init__(msg)

    def __reduce__(self):
        return (type(self), (self.status, self.name, self.text, self.detail,
                             self.node_index, self.node_name))
