"""What a build of libtstor-torch needs of the torch 2.x this Python imports,
for configure (--with-torch-python): one line each of the version it was
built against (major.minor), the C++ ABI flag, the include folders and the
library folder, as torch.utils.cpp_extension gives them to extensions."""
import torch
from torch.utils import cpp_extension

version = torch.__version__.split("+")[0].split(".")
print(".".join(version[:2]))
print(int(torch.compiled_with_cxx11_abi()))
print(" ".join(cpp_extension.include_paths()))
print(cpp_extension.library_paths()[0])
