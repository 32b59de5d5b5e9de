package kubeletlab

// Running tells whether the node is up (not torn down).
func (n *Node) Running() bool { return n.holder != nil }
