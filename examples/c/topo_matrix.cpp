// The GPU-to-HCA path matrix (`nvidia-smi topo -m`'s GPU rows and NIC columns)
// from C++: the C API behind a small RAII wrapper that throws on failure.
//
//   topo_matrix [ROOT]        ROOT: a captured tree; default: this machine
//
// Build: c++ -std=c++17 topo_matrix.cpp $(pkg-config --cflags --libs rdmatopo)
#include <rdmatopo.h>

#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

namespace {

// A failed rdmatopo call, with the library's message (it names the function).
struct Error : std::runtime_error {
    rdmatopo_status status;
    explicit Error(rdmatopo_status s) : std::runtime_error(rdmatopo_last_error_message()), status(s) {}
};

void check(rdmatopo_status s) {
    if (s != RDMATOPO_STATUS_OK) throw Error(s);
}

struct TopologyDeleter {
    void operator()(rdmatopo_topology* t) const { rdmatopo_topology_free(t); }
};

class Topology {
  public:
    explicit Topology(const char* root) {
        rdmatopo_topology* raw = nullptr;
        check(rdmatopo_topology_discover(root, &raw));
        handle_.reset(raw);
    }

    std::vector<rdmatopo_gpu_info> gpus() const {
        size_t n = 0;
        check(rdmatopo_topology_gpu_count(handle_.get(), &n));
        std::vector<rdmatopo_gpu_info> out(n);
        for (size_t i = 0; i < n; i++) check(rdmatopo_topology_gpu(handle_.get(), i, &out[i]));
        return out;
    }

    // RDMA devices with a PCI function (software devices have no PCIe path).
    std::vector<rdmatopo_nic_info> pci_nics() const {
        size_t n = 0;
        check(rdmatopo_topology_nic_count(handle_.get(), &n));
        std::vector<rdmatopo_nic_info> out;
        for (size_t i = 0; i < n; i++) {
            rdmatopo_nic_info nic{};
            check(rdmatopo_topology_nic(handle_.get(), i, &nic));
            if (nic.pci_address != nullptr) out.push_back(nic);
        }
        return out;
    }

    rdmatopo_path path(const char* a, const char* b) const {
        rdmatopo_path p{};
        check(rdmatopo_path_type(handle_.get(), a, b, &p));
        return p;
    }

  private:
    std::unique_ptr<rdmatopo_topology, TopologyDeleter> handle_;
};

}  // namespace

int main(int argc, char** argv) {
    try {
        const Topology topo(argc > 1 ? argv[1] : nullptr);
        const auto gpus = topo.gpus();
        const auto nics = topo.pci_nics();
        for (size_t i = 0; i < nics.size(); i++) std::printf("\tNIC%zu", i);
        std::printf("\tNUMA\n");
        for (const auto& gpu : gpus) {
            std::printf("GPU%zu", gpu.index);
            for (const auto& nic : nics) std::printf("\t%s", topo.path(gpu.pci_address, nic.pci_address).name);
            std::printf("\t%d\n", gpu.numa_node);
        }
        std::printf("\n");
        for (size_t i = 0; i < nics.size(); i++) std::printf("NIC%zu: %s\n", i, nics[i].name);
        return 0;
    } catch (const Error& e) {
        std::fprintf(stderr, "topo_matrix: %s (%s)\n", e.what(), rdmatopo_status_name(e.status));
        return 1;
    }
}
