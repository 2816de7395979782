# The environment of an unpacked GPU bundle (scripts/gpu/bundle.sh): source it, then run
# llmlab from anywhere (bin/ is put first on PATH). Its libraries come first on
# LD_LIBRARY_PATH; OpenMPI and PMIx are pointed at their relocated plugins, help texts and
# settings; the GCC runtime in lib/gcc is added, last, only where the machine has none.
#   . llmlab-gpu/env.sh && llmlab --version
_llmlab_b="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)"
if [ ! -x "$_llmlab_b/bin/llmlab" ]; then
  echo "env.sh: $_llmlab_b is not an unpacked llmlab GPU bundle (no bin/llmlab)" >&2
  return 1 2>/dev/null || exit 1
fi
export LLMLAB_BUNDLE="$_llmlab_b"
export PATH="$_llmlab_b/bin:$_llmlab_b/ompi/bin:$PATH"
_llmlab_ld="$_llmlab_b/lib"
for _f in "$_llmlab_b"/lib/gcc/*; do
  [ -e "$_f" ] || continue
  if ! /sbin/ldconfig -p 2>/dev/null | grep -q " ${_f##*/} "; then _llmlab_gcc=1; fi
done
export LD_LIBRARY_PATH="$_llmlab_ld${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}${_llmlab_gcc:+:$_llmlab_b/lib/gcc}"
# OpenMPI's installation directories, each named (Debian's layout is not all under one prefix)
export OPAL_PREFIX="$_llmlab_b/ompi" OPAL_EXEC_PREFIX="$_llmlab_b/ompi" OPAL_BINDIR="$_llmlab_b/ompi/bin"
export OPAL_LIBDIR="$_llmlab_b/lib" OPAL_PKGLIBDIR="$_llmlab_b/ompi/lib/openmpi"
export OPAL_DATAROOTDIR="$_llmlab_b/ompi/share" OPAL_DATADIR="$_llmlab_b/ompi/share"
export OPAL_PKGDATADIR="$_llmlab_b/ompi/share/openmpi" OPAL_SYSCONFDIR="$_llmlab_b/ompi/etc"
export OMPI_MCA_mca_base_component_path="$_llmlab_b/ompi/lib/openmpi"
export PMIX_INSTALL_PREFIX="$_llmlab_b/pmix" PMIX_MCA_mca_base_component_path="$_llmlab_b/pmix/lib/pmix"
export HWLOC_PLUGINS_PATH="$_llmlab_b/lib/hwloc" # none: hwloc's optional plugins stay out
export LLMLAB_MPIRUN="$_llmlab_b/ompi/bin/mpirun" LLMLAB_LUA_DIR="$_llmlab_b/lua"
unset _llmlab_b _llmlab_ld _llmlab_gcc _f
