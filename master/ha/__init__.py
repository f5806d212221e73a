"""High availability (docs/architecture.md §5):
masters elect a leader in etcd (``election``, on the etcd
thread of ``etcd_thread``), and ``leadership`` runs one leadership term after another in the
process: a fresh runtime over the registry read from etcd while this master leads, a follower
that names the leader otherwise."""
