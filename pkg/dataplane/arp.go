package dataplane

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/vipctl/vipctl/pkg/host"
	"github.com/vipctl/vipctl/pkg/onnode"
)

// ipv4 devconf indexes (linux/ip.h), set over rtnetlink so the sidecar
// needs no writable /proc/sys.
const (
	devconfArpAnnounce = 18
	devconfArpIgnore   = 19
)

// arpSavedFile keeps the interface's ARP settings from before vipctl set
// them, to restore when the last IPv4 local route goes.
const arpSavedFile = onnode.RunDir + "/drain-arp"

// setARP saves the interface's ARP settings once (a later call must not
// save its own values) and sets arp_ignore 1, arp_announce 2.
func setARP(t host.Target, ifindex int, iface string) error {
	conf, err := inetConf(ifindex)
	if err != nil {
		return err
	}
	saved := fmt.Sprintf("%s %d %d\n", iface, conf[devconfArpIgnore], conf[devconfArpAnnounce])
	f, err := os.OpenFile(t.Path(arpSavedFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	switch {
	case errors.Is(err, fs.ErrExist):
	case err != nil:
		return err
	default:
		_, werr := f.WriteString(saved)
		if err := errors.Join(werr, f.Close()); err != nil {
			return err
		}
	}
	if conf[devconfArpIgnore] >= 1 && conf[devconfArpAnnounce] >= 2 {
		return nil
	}
	return setInetConf(ifindex, map[int]uint32{
		devconfArpIgnore:   max(conf[devconfArpIgnore], 1),
		devconfArpAnnounce: max(conf[devconfArpAnnounce], 2),
	})
}

// restoreARP puts back the ARP settings saved before the first route, if
// any were saved.
func restoreARP(t host.Target) error {
	data, err := os.ReadFile(t.Path(arpSavedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	fields := strings.Fields(string(data))
	if len(fields) != 3 {
		return fmt.Errorf("%s: want \"IFACE ARP_IGNORE ARP_ANNOUNCE\", got %q", arpSavedFile, data)
	}
	ignore, err1 := strconv.ParseUint(fields[1], 10, 32)
	announce, err2 := strconv.ParseUint(fields[2], 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("%s: %w", arpSavedFile, err)
	}
	link, err := netlink.LinkByName(fields[0])
	if err == nil {
		err = setInetConf(link.Attrs().Index, map[int]uint32{devconfArpIgnore: uint32(ignore), devconfArpAnnounce: uint32(announce)})
	}
	var notFound netlink.LinkNotFoundError
	if err != nil && !errors.As(err, &notFound) {
		return err
	}
	// Undrain and the local-VIPs loop may restore at once (both when the
	// last local route goes): the file gone means the other one did.
	if err := os.Remove(t.Path(arpSavedFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// inetConf reads an interface's IPv4 settings (the devconf array that
// /proc/sys/net/ipv4/conf/IFACE shows), indexed by devconf number.
func inetConf(ifindex int) (map[int]uint32, error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(ifindex)
	req.AddData(msg)
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
	if err != nil {
		return nil, fmt.Errorf("reading interface %d: %w", ifindex, err)
	}
	for _, m := range msgs {
		attrs, err := nl.ParseRouteAttr(m[unix.SizeofIfInfomsg:])
		if err != nil {
			return nil, err
		}
		for _, a := range attrs {
			if a.Attr.Type&^unix.NLA_F_NESTED != unix.IFLA_AF_SPEC {
				continue
			}
			if conf, ok := inetConfIn(a.Value); ok {
				return conf, nil
			}
		}
	}
	return nil, fmt.Errorf("interface %d: no IPv4 settings", ifindex)
}

func inetConfIn(afSpec []byte) (map[int]uint32, bool) {
	afs, err := nl.ParseRouteAttr(afSpec)
	if err != nil {
		return nil, false
	}
	for _, af := range afs {
		if af.Attr.Type&^unix.NLA_F_NESTED != unix.AF_INET {
			continue
		}
		inet, err := nl.ParseRouteAttr(af.Value)
		if err != nil {
			return nil, false
		}
		for _, c := range inet {
			if c.Attr.Type&^unix.NLA_F_NESTED != unix.IFLA_INET_CONF {
				continue
			}
			conf := map[int]uint32{}
			for i := 0; (i+1)*4 <= len(c.Value); i++ {
				conf[i+1] = nl.NativeEndian().Uint32(c.Value[i*4:])
			}
			return conf, true
		}
	}
	return nil, false
}

// setInetConf sets IPv4 settings of an interface (RTM_SETLINK with
// IFLA_AF_SPEC/AF_INET/IFLA_INET_CONF): CAP_NET_ADMIN is enough.
func setInetConf(ifindex int, values map[int]uint32) error {
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(ifindex)
	req.AddData(msg)
	spec := nl.NewRtAttr(unix.IFLA_AF_SPEC, nil)
	conf := spec.AddRtAttr(unix.AF_INET, nil).AddRtAttr(unix.IFLA_INET_CONF, nil)
	for id, v := range values {
		conf.AddRtAttr(id, nl.Uint32Attr(v))
	}
	req.AddData(spec)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("setting ARP settings of interface %d: %w", ifindex, err)
	}
	return nil
}
