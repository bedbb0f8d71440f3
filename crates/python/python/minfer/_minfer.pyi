"""The native module: a server in process (see ``minfer._model``)."""

from typing import Optional

__version__: str

class MinferError(Exception): ...

class Response:
    stream: bool
    def head(self, timeout: float = 0.1) -> Optional[int]: ...
    def read(self, timeout: float = 0.1) -> Optional[bytes]: ...
    def close(self) -> None: ...

class Server:
    def __init__(
        self,
        model: Optional[str] = None,
        *,
        n_ctx: int = 4096,
        threads: Optional[int] = None,
        n_parallel: int = 4,
        batch_size: int = 512,
        device: str = "auto",
        kv_type: str = "f16",
        simd: Optional[str] = None,
        seed: Optional[int] = None,
        chat_template: Optional[str] = None,
        models_dir: Optional[str] = None,
        home: Optional[str] = None,
        draft: Optional[str] = None,
        lookup: int = 0,
        draft_max: Optional[int] = None,
    ) -> None: ...
    @property
    def model(self) -> Optional[str]: ...
    def request(self, method: str, path: str, body: bytes) -> Response: ...
