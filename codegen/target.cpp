#include "codegen/target.h"

#include <algorithm>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

#include <llvm/ADT/StringMap.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>

#include "codegen/llvm/llvm_support.h"
#include "runtime/error.h"
#include "runtime/module.h"

namespace kiln::codegen {
namespace {

constexpr const char* kSpecHelp = "expected \"llvm [-mtriple=TRIPLE] [-mcpu=NAME] [-mattr=+f,-g]\"";

const std::string& hostTriple() {
  static const std::string triple = llvm::Triple::normalize(llvm::sys::getProcessTriple());
  return triple;
}

/// The features CPUID reports but the operating system withholds, counted as absent: Linux hides
/// RDSEED on Zen 5 (its erratum) while CPUID still sets it, and a module compiled with it would
/// be refused by the runtime's check (/proc/cpuinfo) on the very machine that compiled it.
const std::set<std::string>& withheldHostFeatures() {
  static const std::set<std::string> withheld = [] {
    std::vector<std::string> present;
    for (const auto& entry : llvm::sys::getHostCPUFeatures())
      if (entry.second) present.push_back(entry.first().str());
    std::vector<std::string> missing = runtime::missingCpuFeatures(present);
    return std::set<std::string>(missing.begin(), missing.end());
  }();
  return withheld;
}

/// The host's features as an LLVM feature string, sorted by name so it is deterministic
/// (StringMap iterates in hash order). Absent features are listed as "-name" so that a CPU name
/// whose model implies a feature the machine lacks (a VM hiding AVX-512, a withheld feature)
/// stays correct.
std::string detectHostFeatures() {
  auto features = llvm::sys::getHostCPUFeatures();
  std::vector<std::string> names;
  for (const auto& entry : features) names.push_back(entry.first().str());
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& name : names) {
    if (!out.empty()) out += ',';
    out += (features.lookup(name) && !withheldHostFeatures().count(name) ? "+" : "-") + name;
  }
  return out;
}

const std::string& hostFeatureString() {
  static const std::string features = detectHostFeatures();
  return features;
}


std::unique_ptr<llvm::MCSubtargetInfo> subtargetInfo(const llvm::Target* target, const std::string& triple,
                                                     const std::string& cpu, const std::string& features) {
  return std::unique_ptr<llvm::MCSubtargetInfo>(target->createMCSubtargetInfo(triple, cpu, features));
}

bool isKnownFeature(const llvm::MCSubtargetInfo& sti, llvm::StringRef name) {
  for (const auto& kv : sti.getAllProcessorFeatures()) {
    if (name == kv.Key) return true;
  }
  return false;
}

/// True when every feature the (cpu, features) subtarget enables is present on this machine.
bool supportedByHost(const llvm::Target* target, const std::string& triple, const std::string& cpu,
                     const std::string& features) {
  auto host = llvm::sys::getHostCPUFeatures();
  if (host.empty()) return true;  // LLVM cannot tell on this platform: trust the user
  auto sti = subtargetInfo(target, triple, cpu, features);
  for (const auto& entry : host) {
    if ((entry.second && !withheldHostFeatures().count(entry.first().str())) || !isKnownFeature(*sti, entry.first()))
      continue;
    if (sti->checkFeatures("+" + entry.first().str())) return false;
  }
  return true;
}

struct SpecOptions {
  std::string triple, cpu, mattr;
  bool hasTriple = false, hasCpu = false, hasMattr = false;
};

SpecOptions tokenize(const std::string& spec) {
  std::stringstream in(spec);
  std::string word;
  if (!(in >> word) || word != "llvm") {
    throw Error("unknown target '" + spec + "' (" + kSpecHelp + ")", ErrorKind::Usage);
  }
  SpecOptions opts;
  auto take = [&](const std::string& token, const char* prefix, std::string& value, bool& seen) {
    std::string p = prefix;
    if (token.rfind(p, 0) != 0) return false;
    if (seen)
      throw Error("duplicate target option " + p.substr(0, p.size() - 1) + " in '" + spec + "'",
                  ErrorKind::Usage);
    value = token.substr(p.size());
    if (value.empty())
      throw Error("empty value for target option " + token + " in '" + spec + "'", ErrorKind::Usage);
    seen = true;
    return true;
  };
  while (in >> word) {
    if (take(word, "-mtriple=", opts.triple, opts.hasTriple)) continue;
    if (take(word, "-mcpu=", opts.cpu, opts.hasCpu)) continue;
    if (take(word, "-mattr=", opts.mattr, opts.hasMattr)) continue;
    throw Error("unknown target option '" + word + "' in '" + spec + "' (" + kSpecHelp + ")",
                ErrorKind::Usage);
  }
  return opts;
}

}  // namespace

std::string hostCpuName() { return llvm::sys::getHostCPUName().str(); }

std::string llvmVersion() { return LLVM_VERSION_STRING; }

Target Target::parse(const std::string& spec) {
  SpecOptions opts = tokenize(spec);
  initializeLLVM();

  const std::string host = hostTriple();
  Target t;
  t.triple = opts.hasTriple ? llvm::Triple::normalize(opts.triple) : host;
  std::string err;
  const llvm::Target* llvmTarget = llvm::TargetRegistry::lookupTarget(t.triple, err);
  if (llvmTarget == nullptr)
    throw Error("unknown target triple '" + opts.triple + "': " + err, ErrorKind::Usage);
  const llvm::Triple parsed(t.triple), hostParsed(host);
  const bool hostArch = parsed.getArch() == hostParsed.getArch();
  const bool hostSystem = hostArch && parsed.getOS() == hostParsed.getOS() &&
                          parsed.getObjectFormat() == hostParsed.getObjectFormat();

  // A subtarget with no CPU: knows the target's CPU and feature tables without warnings.
  auto tables = subtargetInfo(llvmTarget, t.triple, "", "");
  std::string cpu = opts.hasCpu ? opts.cpu : (hostArch ? "native" : "generic");
  if (cpu == "native") {
    if (!hostArch)
      throw Error("-mcpu=native needs the host architecture, not '" + t.triple + "'", ErrorKind::Usage);
    t.cpu = hostCpuName();
    t.features = hostFeatureString();
  } else {
    if (!tables->isCPUStringValid(cpu)) {
      throw Error("unknown CPU '" + cpu + "' for target " + t.triple, ErrorKind::Usage);
    }
    t.cpu = cpu;
  }
  if (opts.hasMattr) {
    for (const std::string& f : splitFeatures(opts.mattr)) {
      if ((f[0] != '+' && f[0] != '-') || !isKnownFeature(*tables, llvm::StringRef(f).drop_front())) {
        throw Error("unknown feature '" + f + "' for target " + t.triple + " (write +name or -name)",
                    ErrorKind::Usage);
      }
      if (!t.features.empty()) t.features += ',';
      t.features += f;
    }
  }
  t.runnable = hostSystem && supportedByHost(llvmTarget, t.triple, t.cpu, t.features);
  return t;
}

std::string Target::strWithCpu() const {
  std::string s = str();
  if (s == "llvm" || s.rfind("llvm -mattr", 0) == 0) s.insert(4, " -mcpu=" + cpu);
  return s;
}

std::string Target::str() const {
  const std::string& hostFeatures = hostFeatureString();
  std::string s = "llvm";
  if (triple != hostTriple()) s += " -mtriple=" + triple;
  // The detected host (with optional extra -mattr features appended) prints as plain "llvm".
  const bool isHostCpu = triple == hostTriple() && cpu == hostCpuName() &&
                         features.rfind(hostFeatures, 0) == 0 &&
                         (features.size() == hostFeatures.size() || features[hostFeatures.size()] == ',');
  std::string extra = features;
  if (isHostCpu) {
    extra = features.size() > hostFeatures.size() ? features.substr(hostFeatures.size() + 1) : "";
  } else {
    s += " -mcpu=" + cpu;
  }
  if (!extra.empty()) s += " -mattr=" + extra;
  return s;
}

}  // namespace kiln::codegen
