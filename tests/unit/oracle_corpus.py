"""The inventories the Ansible oracle test compares fabnet with (tests/corpus/inventories/INDEX.md), and
what is asked of each: host patterns, limits, groups known to be empty, patterns Ansible answers with nothing."""

from __future__ import annotations

from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "inventories"
SLURM = CORPUS / "slurm-appliance" / "environments"
OPENSHIFT = CORPUS / "openshift-ansible" / "inventory"
CORE = CORPUS / "ansible-core"
KAYOBE = [CORPUS / "kayobe/ansible/inventory", CORPUS / "kayobe/etc/kayobe/inventory"]
FGCI = CORPUS / "fgci-ansible"
EXAMPLES = CORPUS / "inventory-file-examples"
BLUEBANQUISE = CORPUS / "bluebanquise"
MITOGEN = CORPUS / "mitogen/hosts"
CEPH = CORPUS / "ceph-ansible"
SONIC = CORPUS / "sonic-mgmt/ansible"
GOLDENTOOTH = CORPUS / "goldentooth/inventory"
OMNIA = CORPUS / "omnia"
STACKHPC_KAYOBE = CORPUS / "stackhpc-kayobe-config/etc/kayobe"
ONE_DEPLOY = CORPUS / "one-deploy/inventory"
NVUE = CORPUS / "nvidia-nvue/examples"
CASES: dict[str, list[Path]] = {
    "deepops-config-example": [CORPUS / "deepops/config.example/inventory"],
    "deepops-virtual": [CORPUS / "deepops/virtual/virtual_inventory"],
    "deepops-virtual-full": [CORPUS / "deepops/virtual/virtual_inventory_full"],
    "deepops-virtual-large-slurm": [CORPUS / "deepops/virtual/virtual_inventory_large_slurm"],
    "kubespray-sample": [CORPUS / "kubespray/inventory/sample/inventory.ini"],
    "kolla-multinode": [CORPUS / "kolla-ansible/multinode"],
    "kolla-all-in-one": [CORPUS / "kolla-ansible/all-in-one"],
    "slurm-appliance-caas": [SLURM / "common/inventory", SLURM / ".caas/inventory"],
    "slurm-appliance-site": [SLURM / "common/inventory", SLURM / "site/inventory", SLURM / "example/inventory"],
    "ini-forms": [CORPUS / "fabnet/ini-forms/hosts"],
    "mixed-directory": [CORPUS / "fabnet/mixed-dir"],
    "duplicate-keys": [CORPUS / "fabnet/duplicate-keys/hosts.yml"],
    "fabnet-example": [CORPUS.parents[2] / "inventories/example/hosts.yml"],
    "openshift-example": [OPENSHIFT / "hosts.example"],
    "openshift-openstack": [OPENSHIFT / "hosts.openstack"],
    "openshift-glusterfs": [OPENSHIFT / "hosts.glusterfs.native.example"],
    "openshift-localhost": [OPENSHIFT / "hosts.localhost"],
    "ceph-all-daemons": [CORPUS / "ceph-ansible/all_daemons/hosts"],
    "kayobe": KAYOBE,
    "k3s-sample": [CORPUS / "k3s-ansible/inventory-sample.yml"],
    "debops-rails": [CORPUS / "debops/ansible/inventory"],
    "ohpc-linaro": [CORPUS / "ohpc-linaro/inventory/hosts"],
    "core-complex": [CORE / "ansible-inventory/files/complex.ini"],
    "core-unicode": [CORE / "ansible-inventory/files/unicode.yml"],
    "core-valid-sample": [CORE / "ansible-inventory/files/valid_sample.yml"],
    "core-toml": [CORE / "ansible-inventory/files/valid_sample.toml"],
    "core-int-keys": [CORE / "inventory/inv_with_int.yml"],
    "core-var-blending": [CORE / "var_blending/inventory"],
    "core-var-precedence": [CORE / "var_precedence/inventory"],
    "core-comma-dir": [CORE / "path_with_comma_in_inventory/this,path,has,commas"],
    "core-special-vars": [CORE / "special_vars_hosts/inventory"],
    "core-inventory-ini": [CORE / "inventory_ini/inventory.ini"],
    "core-hash-two-sources": [CORE / "hash/test_inv1.yml", CORE / "hash/test_inv2.yml"],
    "core-group-by": [CORE / "group_by/inventory.group_by"],
    "core-limit-inventory": [CORE / "limit_inventory/hosts.yml"],
    "core-inventory-yaml": [CORE / "inventory_yaml/test.yml"],
    "core-order": [CORE / "order/inventory"],
    "fgci-examples": [FGCI / "examples/hosts-example"],
    "fgci-tests": [FGCI / "tests/inventory"],
    "examples-depth-win": [EXAMPLES / "precedence/depth_win.yml"],
    "examples-depth-win2": [EXAMPLES / "precedence/depth_win2.yml"],
    "examples-depth-win3": [EXAMPLES / "precedence/depth_win3.yml"],
    "examples-from-docs": [EXAMPLES / "precedence/from_docs.yml"],
    "examples-everything": [EXAMPLES / "static/everything/inventory.ini"],
    "examples-two": [EXAMPLES / "static/two/inv1/inventory1.ini", EXAMPLES / "static/two/inv2/inventory2.ini"],
    "examples-vars-dirs": [EXAMPLES / "static/vars_dirs/inv"],
    "examples-ordered": [EXAMPLES / "static/ordered/hosts"],
    "examples-yaml": [EXAMPLES / "yaml/ansible_example.yml"],
    "bluebanquise-simple": [BLUEBANQUISE / "simple_cluster"],
    "bluebanquise-icebergs": [BLUEBANQUISE / "multi_icebergs_cluster/inventory"],
    # Every file of the directory but default.hosts, which fabnet refuses (lookup('pipe'), see below).
    "mitogen": [MITOGEN / name for name in ("become_same_user.hosts", "connection_delegation.hosts", "issue340",
                                            "k3.hosts.disabled", "localhost.hosts.disabled",
                                            "osa-containers.hosts.disabled", "transport_config.hosts")],
    "ceph-collocation": [CEPH / "collocation/hosts"],
    "ceph-all-daemons-ipv6": [CEPH / "all_daemons_ipv6/hosts"],
    "ceph-external-clients": [CEPH / "external_clients/inventory"],
    "sonic-inventory": [SONIC / "inventory"],
    "sonic-veos-vtb": [SONIC / "veos_vtb"],
    "core-invalid-group": [CORE / "inventory-invalid-group/inventory.ini"],
    "core-unicode-var": [CORE / "unicode/inventory"],
    "core-numeric-host": [CORE / "hosts_field/inventory.hosts_field"],
    "core-hostnames": [CORE / "lookup_inventory_hostnames/inventory"],
    "core-delegate-to": [CORE / "delegate_to/inventory"],
    "core-host-pinned": [CORE / "strategy_host_pinned/hosts"],
    "core-vault-toml": [CORE / "ansible-vault/inventory.toml"],
    "goldentooth": [GOLDENTOOTH],
    "omnia-hosts": [OMNIA / "examples/inventory/host_inventory_file"],
    "omnia-ip-rule": [OMNIA / "examples/inventory/ip_rule_inv_template"],
    "omnia-server-spec": [OMNIA / "examples/inventory/server_spec_inv"],
    "omnia-nfs": [OMNIA / "examples/inventory/nfs_server_inventory_file"],
    "omnia-pxeboot": [OMNIA / "test/test_one_time_pxeboot_inv"],
    "omnia-k8s-upgrade": [OMNIA / "utils/k8s-upgrade/inventory.yml"],
    "omnia-k8s-localhost": [OMNIA / "telemetry/roles/orchestrator/files/k8s_inv.ini"],
    "cloud-native-stack": [CORPUS / "cloud-native-stack/playbooks/hosts"],
    "stackhpc-kayobe-config": [KAYOBE[0], STACKHPC_KAYOBE / "inventory"],
    "stackhpc-kayobe-ci-multinode": [KAYOBE[0], STACKHPC_KAYOBE / "inventory",
                                     STACKHPC_KAYOBE / "environments/ci-multinode/inventory"],
    "nvue-hosts": [NVUE / "hosts"],
    "nvue-mlag-bgp": [NVUE / "inventories/mlag-bgp"],
    "one-deploy-evpn-ha": [ONE_DEPLOY / "evpn-ha.yml"],
    "one-deploy-ceph-hci": [ONE_DEPLOY / "ceph-hci.yml"],
    "one-deploy-infra": [ONE_DEPLOY / "infra.yml"],
    "one-deploy-shared-generic": [ONE_DEPLOY / "shared-generic.yml"],
    "one-deploy-federation-master": [ONE_DEPLOY / "federation-master.yml"],
    "galaxy-eu": [CORPUS / "galaxy-eu/hosts"],
}

# Patterns whose answer both tools must give identically.
PATTERNS: dict[str, list[str]] = {
    "kolla-multinode": [
        "control", "control[0]", "control[-1]", "control[1:]", "control[0:1]", "control[0:0]", "baremetal[3]",
        "baremetal[1:4]", "~control", "~c", "~.*0[12]$", "contr*", "*01", "control:network", "control,network",
        "baremetal:!control", "baremetal:&network", "common:!compute:&baremetal", "all:!localhost",
        "control01,nosuchhost", "!baremetal", "&control", "compute*:storage", "nova", "neutron:&tls-backend",
        "deployment", "*", "ba?emetal",
    ],
    "deepops-virtual-large-slurm": [
        "slurm-node", "slurm-node[0]", "slurm-node[-1]", "slurm-node[1:]", "slurm-cluster:!slurm-node",
        "slurm-cluster[0:3]", "~virtual-gpu0[1-3]", "virtual-gpu0*", "slurm-*",
    ],
    "slurm-appliance-site": [
        "compute", "compute[1]", "compute[-1]", "compute[1:]", "cluster", "login:control", "openhpc:!gpu",
        "~hpc-(gpu|login)", "hpc-*-0", "openhpc:&standard",
    ],
    "ini-forms": [
        "gpu", "gpu[0]", "gpu[-2]", "gpu[3:5]", "fabric", "fabric:!rack_a", "gpu-b*", "spare*", "~spare0",
        "storage:&fabric", "ungrouped", "all:!gpu",
    ],
    "mixed-directory": ["gpu", "gpu[-1]", "storage", "gpu:storage", "~gpu-a", "rack_b:!gpu-b02"],
    "openshift-example": [
        "OSEv3", "nodes", "nodes[0]", "nodes[-1]", "nodes[2:4]", "nodes:!masters", "etcd:&nodes", "OSEv3:!lb",
        "~ose3-(infra|node)[12]", "ose3-node*", "*.test.example.com", "nfs:lb",
    ],
    "openshift-openstack": ["nodes", "nodes:!masters", "jdetiber-node*", "OSEv3:!etcd", "~jdetiber-node[0-9]"],
    "ceph-all-daemons": [
        "mons", "mons[1:]", "osds:mons", "all:!mons", "ceph_monitoring:&mons", "~(mds|rgw)[0-9]", "rbd-mirror*",
        "osd[0-1]*", "clients[-1]", "mgrs,rgws",
    ],
    "k3s-sample": ["server", "agent", "k3s_cluster:!server", "192.16.35.1*", "agent[1]", "~.*\\.1[23]$"],
    "debops-rails": ["containers", "containers:&debops_ruby", "debops_*", "all:!containers", "somehost"],
    "ohpc-linaro": ["devnodes:!sms", "cnodes[0]", "192.168.33.2*", "ionodes:&sms", "cnodes:ionodes"],
    "core-complex": [
        "parent_3", "parent_3:!test_group2", "test_group1:&test_group3", "ungrouped", "ihavenogroup",
        "~test[1-3]", "parent_1:parent_2", "test_group3[1:]", "hostinall",
    ],
    "core-unicode": ["příbor", "all", "p*"],
    "fgci-examples": [
        "compute", "pxe_bootable_nodes", "pxe_bootable_nodes:!compute", "nfs_mount:&vhosts", "production[0]",
        "pxe_bootable_nodes[-1]", "ph*", "~phoenix-(nfs|admin)", "slurm_compute[1:3]", "all:!slurm_compute", "gpu",
        "vhosts,nfs",
    ],
    "examples-two": ["ungrouped", "southeast", "northeast", "all[1:]", "all:&ungrouped"],
    "examples-vars-dirs": ["southeast", "usa", "southeast:!raleigh", "usa[1]", "atlanta:&raleigh"],
    "core-order": ["incremental", "incremental[1:2]", "host?", "incremental[-1]", "~host[AB]"],
    "bluebanquise-simple": [
        "fn_compute", "fn_compute[0]", "fn_compute[-1]", "c00*", "~g00[12]", "hw_cpu_server_type_A:&os_ubuntu_24",
        "all:!fn_compute", "os_ubuntu_24[2:4]", "fn_management,hw_gpu_server_type_B",
    ],
    "bluebanquise-icebergs": [
        "iceberg3", "iceberg3:&gpu", "fn_compute:!iceberg2", "secondary_managements", "~^c00[246]$",
        "iceberg2[-1]", "management*:!iceberg1", "fn_compute[4:]",
        "gpu[001:002]",  # the group gpu, 001 read as 1
    ],
    "mitogen": [
        "transport_config", "transport_config:!tc_password", "cd*", "k3-x10[-1]", "k3-x500[100:103]", "tc_*",
        "~^tc-remote-addr-explicit-(ssh|host)$", "connection-delegation-test:connection-delegation-cycle",
        "localhost-x100:!localhost-x90", "osa-all-containers", "issue340[1]", "transport_config_undiscover[0]",
    ],
    "ceph-collocation": ["rgws", "rgws:&mdss", "mdss:rbdmirrors", "all:!mons", "rgws[-1]", "~(rgw|mds)0"],
    "sonic-veos-vtb": [
        "lab:&sonic", "servers", "vms_1[10:20]", "VM01?0", "ptf:lab", "sonic:!lab", "all:!servers", "~vlab-0[1-3]",
        "server_1[0]", "VM01[0-9]*",
    ],
    "sonic-inventory": ["sonic", "sonic[1:]", "leaf_topo_1:ptf", "switch*:!leaf_topo_1"],
    "core-hostnames": ["group01", "group01[-1]", "group02:&group01", "ungrouped", "test2*", "all[2:4]"],
    "goldentooth": [
        "k8s_worker", "k8s_cluster:&slurm", "ray_worker:!ray_worker_gpu", "all_pi_4b[0:3]", "~^(bettley|cargyll)$",
        "slurm_compute:!k8s_control_plane", "all_pi_4b_8gb[-1]", "k8s_worker_gpu:ray_worker_gpu", "*gpu",
        "consul_*:&all_pi_5", "all:!all_pis", "all_nodes[1:]", "slurm[2:4]", "all:!localhost",
    ],
    "omnia-hosts": [
        "etcd:&kube_node", "kube_node[1:3]", "slurm_node:login", "kube_node:!etcd", "~node1[02]?$", "node1*",
        "etcd[-1]", "all:!kube_node", "kube_control_plane:slurm_control_node",
    ],
    "nvue-mlag-bgp": [
        "switches", "switches[0]", "switches[-1]", "leafs:spines", "switches:!borders", "~^(leaf|spine)0[24]$",
        "*01", "switches:&leafs[1:]", "border*",
    ],
    "one-deploy-ceph-hci": ["ceph", "ceph:!frontend", "osd:&node", "ceph[1:]", "n?", "~^[fn]1$", "mon:osd"],
    "galaxy-eu": [
        "htcondor", "htcondor:&galaxyservers", "build:libvirt", "dnbd3:!sn12.galaxyproject.eu", "~^sn1[0-2]",
        "celery*", "celerycluster[0:2]", "celerycluster[-1]", "htcondor-submit:&sn09", "all:!celerycluster",
        "*.bi.privat:&htcondor", "dnbd3[1]",
    ],
}

# Known groups without hosts: nothing selected, and no error (as in Ansible).
EMPTY = {
    "slurm-appliance-site": ["fatimage", "builder"], "kolla-multinode": ["ungrouped"],
    "kayobe": ["controllers", "overcloud", "switches", "compute-vgpu"], "debops-rails": ["ansible_controller"],
    "openshift-openstack": ["lb"],
    "cloud-native-stack": ["master", "nodes"], "omnia-hosts": ["nfs:&etcd"],
}

# Patterns where Ansible selects no host (unknown names only) or fails: fabnet refuses them.
REFUSED = {
    "kolla-multinode": ["~ontrol", "nosuchgroup", "network0[12]", "nosuch:!control", "control[7]"],
    "deepops-virtual-large-slurm": ["k8s_cluster:&slurm-node"],
    "ceph-all-daemons": ["nfss", "mon3", "mons[3]", "mons:osds,!mon1"],
    "k3s-sample": ["~\\.1[23]$"],  # a regex matches from the start of the name
    "openshift-openstack": ["~node[0-9]"],
    "core-complex": ["test[2-4]"],
    "examples-two": ["host[13]"],  # Ansible reads [13] as a subscript of a group named 'host'
    "bluebanquise-icebergs": ["c00[1:3]", "c[001:006]"],  # subscripts past the end of 'c00'/'gpu'
    "sonic-veos-vtb": ["VM01[0-9]", "vms_1[40]"],
    "mitogen": ["k3-[01:10]"],
}

# Patterns whose host ORDER is checked too (`ansible PATTERN --list-hosts` keeps Ansible's order). Only
# where Ansible defines one: it walks grandchild groups in the iteration order of a set of objects.
ORDERED = {
    "kolla-multinode": ["baremetal", "compute*:storage:control[1:]", "~.*0[12]$", "baremetal[1:4]"],
    "slurm-appliance-site": ["compute", "login:control", "compute[1:]"],
    "openshift-example": ["nodes", "OSEv3", "nodes[1:]", "~ose3-(infra|node)[12]"],
    "ceph-all-daemons": ["mons", "all", "osds:mons"],
    "core-complex": ["parent_3", "parent_3:!test_group2"],
    "fgci-examples": ["compute", "pxe_bootable_nodes", "pxe_bootable_nodes:!compute", "slurm_compute[1:3]"],
    "examples-vars-dirs": ["southeast", "usa", "usa[1]"],
    "core-order": ["incremental", "incremental[1:2]", "~host[AB]"],
    "bluebanquise-icebergs": ["iceberg3", "fn_compute", "fn_compute:!iceberg2", "all"],
    "mitogen": ["transport_config", "k3-x500[100:103]", "cd*"],
    "sonic-veos-vtb": ["servers", "vms_1[10:20]", "eos:lab"],
    "core-hostnames": ["group02", "all", "all[2:4]"],
    "goldentooth": ["k8s_worker", "all_pi_4b", "ray_worker", "slurm_compute[1:3]", "all"],
    "omnia-hosts": ["kube_node", "etcd", "kube_node:!etcd"],
    "nvue-mlag-bgp": ["switches", "switches[1:4]", "leafs:spines"],
    "galaxy-eu": ["celerycluster", "htcondor", "dnbd3", "celerycluster[1:3]"],
}

LIMITS = {
    "kolla-multinode": ["control:&baremetal", "~comp.*,storage01", "common[2:3]:!network02", "@retry"],
    "slurm-appliance-site": ["compute:!hpc-gpu-1", "@retry"],
    "openshift-example": ["nodes:!ose3-master2.test.example.com", "OSEv3[0:2]", "@retry"],
    "ceph-all-daemons": ["mons,osds,!mon1", "~^(mon|osd)[02]$", "@retry", "mons,osds:!mon1"],
    "core-complex": ["parent_3:&test_group1", "test_group3[0:1]"],
    "fgci-examples": ["pxe_bootable_nodes:!compute", "@retry", "compute[0:1],login"],
    "bluebanquise-icebergs": ["fn_compute:!gpu", "iceberg1,iceberg3[0]", "@retry", "~c00[1-3]"],
    "mitogen": ["transport_config:&tc_password", "k3-x10[0:2],issue340", "@retry"],
    "sonic-veos-vtb": ["lab:!~vlab-0[1-3]", "servers:&vms_1[0:4]", "@retry"],
    "goldentooth": [
        "k8s_cluster:!k8s_worker_gpu", "~^(bettley|dalt)$,velaryon", "all_pi_5,!payne", "localhost:all_pi_5",
    ],
    "galaxy-eu": ["htcondor:!maintenance.bi.privat", "celerycluster[1:3],sn*", "@retry"],
    "nvue-mlag-bgp": ["switches:!leafs", "leafs[0:1],spine0*"],
}
RETRY_FILES = {
    "kolla-multinode": "control02\nnetwork01\n\n", "slurm-appliance-site": "hpc-gpu-0\nhpc-login-0\n",
    "openshift-example": "ose3-lb.test.example.com\nose3-node1.test.example.com\n",
    "ceph-all-daemons": "osd2\nclient1\n", "fgci-examples": "ph1\nphoenix\n",
    "bluebanquise-icebergs": "gpu001\nc004\n", "mitogen": "k3-050\ntc-port-unset\n",
    "sonic-veos-vtb": "VM0101\nptf-03\n",
    "galaxy-eu": "sn09.galaxyproject.eu\ncelery-2.bi.privat\n",
}
