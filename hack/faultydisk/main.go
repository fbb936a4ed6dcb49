// nodedisks-faultydisk serves one file over FUSE whose reads or writes fail with EIO on command: the
// backing of a loop device that behaves like a failing disk, for the tests of disk health. Every read and
// write reaches this program (direct I/O on the FUSE side), so a command takes effect on the next request,
// whatever the page cache holds.
//
//	nodedisks-faultydisk --image <file> --mountpoint <dir> [--name disk.img]
//
// It prints "ready" once the file is served. Then each line on stdin is a command, answered by one line:
// "fail reads", "fail writes", "fail all", "heal" → "ok <mode>", anything else → "error: ...". At the end of
// stdin, or on SIGTERM or SIGINT, it unmounts and exits.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

const (
	failReads  = 1
	failWrites = 2
)

var modeNames = map[int32]string{0: "healthy", failReads: "failing reads", failWrites: "failing writes", failReads | failWrites: "failing all"}

type root struct {
	fs.Inode
	name string
	disk *disk
}

func (r *root) OnAdd(ctx context.Context) {
	child := r.NewPersistentInode(ctx, r.disk, fs.StableAttr{Mode: syscall.S_IFREG, Ino: 2})
	r.AddChild(r.name, child, false)
}

type disk struct {
	fs.Inode
	file *os.File
	// The file's size: a wipe cuts it to 0 and extends it again, as it does a disk image.
	size atomic.Int64
	mode atomic.Int32
	// Requests refused so far, for the answers (a test can see that its IO reached this program).
	refused atomic.Int64
}

var (
	_ fs.NodeGetattrer = (*disk)(nil)
	_ fs.NodeOpener    = (*disk)(nil)
	_ fs.NodeReader    = (*disk)(nil)
	_ fs.NodeWriter    = (*disk)(nil)
	_ fs.NodeFsyncer   = (*disk)(nil)
	_ fs.NodeSetattrer = (*disk)(nil)
)

func (d *disk) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o600
	out.Size = uint64(d.size.Load())
	// What the backing file has allocated: a sparse or wiped (cut and extended) file has nothing, as an
	// image has. With a block size set, go-fuse keeps these blocks; without, it puts the whole size there.
	var st syscall.Stat_t
	if err := syscall.Fstat(int(d.file.Fd()), &st); err == nil {
		out.Blocks = uint64(st.Blocks)
		out.Blksize = uint32(st.Blksize)
	}
	return 0
}

// Setattr accepts what tools ask besides the size (times, mode), and a change of size as a file would,
// unless writes fail.
func (d *disk) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok && int64(sz) != d.size.Load() {
		if d.mode.Load()&failWrites != 0 {
			d.refused.Add(1)
			return syscall.EIO
		}
		if err := d.file.Truncate(int64(sz)); err != nil {
			return syscall.EIO
		}
		d.size.Store(int64(sz))
	}
	return d.Getattr(ctx, fh, out)
}

func (d *disk) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (d *disk) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if d.mode.Load()&failReads != 0 {
		d.refused.Add(1)
		return nil, syscall.EIO
	}
	n, err := d.file.ReadAt(dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, syscall.EIO
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (d *disk) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if d.mode.Load()&failWrites != 0 {
		d.refused.Add(1)
		return 0, syscall.EIO
	}
	if off+int64(len(data)) > d.size.Load() {
		return 0, syscall.ENOSPC
	}
	n, err := d.file.WriteAt(data, off)
	if err != nil {
		return uint32(n), syscall.EIO
	}
	return uint32(n), 0
}

func (d *disk) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if d.mode.Load()&failWrites != 0 {
		d.refused.Add(1)
		return syscall.EIO
	}
	if err := d.file.Sync(); err != nil {
		return syscall.EIO
	}
	return 0
}

func command(d *disk, line string) string {
	var mode int32
	switch strings.TrimSpace(line) {
	case "fail reads":
		mode = failReads
	case "fail writes":
		mode = failWrites
	case "fail all":
		mode = failReads | failWrites
	case "heal":
		mode = 0
	default:
		return fmt.Sprintf("error: unknown command %q (fail reads, fail writes, fail all, heal)", line)
	}
	d.mode.Store(mode)
	return fmt.Sprintf("ok %s (%d requests refused so far)", modeNames[mode], d.refused.Load())
}

func main() {
	image := flag.String("image", "", "the file whose bytes the served file holds")
	mountpoint := flag.String("mountpoint", "", "an empty dir to serve the file in")
	name := flag.String("name", "disk.img", "the served file's name")
	flag.Parse()
	if *image == "" || *mountpoint == "" || strings.Contains(*name, "/") {
		fmt.Fprintln(os.Stderr, "usage: nodedisks-faultydisk --image <file> --mountpoint <dir> [--name <file name>]")
		os.Exit(2)
	}
	f, err := os.OpenFile(*image, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot open the image: %v\n", err)
		os.Exit(2)
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		fmt.Fprintf(os.Stderr, "%s is not a regular file\n", *image)
		os.Exit(2)
	}
	d := &disk{file: f}
	d.size.Store(st.Size())
	server, err := fs.Mount(*mountpoint, &root{name: *name, disk: d}, &fs.Options{
		MountOptions: fuse.MountOptions{
			// No fusermount on the machines that run this: root mounts it itself, or not at all.
			DirectMount:       true,
			DirectMountStrict: true,
			AllowOther:        true,
			FsName:            "nodedisks-faultydisk",
			Name:              "faultydisk",
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot mount on %s: %v\n", *mountpoint, err)
		os.Exit(1)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		_ = server.Unmount()
	}()
	go func() {
		fmt.Println("ready")
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			fmt.Println(command(d, in.Text()))
		}
		_ = server.Unmount()
	}()
	server.Wait()
}
